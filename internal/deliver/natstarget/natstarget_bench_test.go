package natstarget

import (
	"sync/atomic"
	"testing"

	"github.com/idem-dev/idem/internal/deliver"
)

// BenchmarkDeliver publishes to a memory stream on the local NATS server and
// waits for each acknowledgement: sequentially, and 8 in flight per core.
func BenchmarkDeliver(b *testing.B) {
	for _, mode := range []string{"serial", "parallel"} {
		b.Run(mode, func(b *testing.B) {
			bd := setup(b)
			target, err := New(bd.js, &Config{Subject: bd.subject})
			if err != nil {
				b.Fatal(err)
			}
			var id deliverCounter
			b.ResetTimer()
			if mode == "serial" {
				for b.Loop() {
					if out := target.Deliver(b.Context(), id.next()); out.Class != deliver.Completed {
						b.Fatalf("publish: %v", out.Err)
					}
				}
				return
			}
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if out := target.Deliver(b.Context(), id.next()); out.Class != deliver.Completed {
						b.Errorf("publish: %v", out.Err)
						return
					}
				}
			})
		})
	}
}

// deliverCounter hands out deliveries with distinct message ids.
type deliverCounter struct{ n atomic.Int64 }

func (c *deliverCounter) next() *deliver.Delivery {
	n := c.n.Add(1)
	return &deliver.Delivery{JobID: n, Kind: "bench", Attempt: 1}
}
