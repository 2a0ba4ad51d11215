package idem_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// countingObserver counts job events by type.
type countingObserver struct {
	mu     sync.Mutex
	counts map[idem.EventType]int
}

func (o *countingObserver) ObserveJob(e *idem.JobEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.counts[e.Type]++
}

// An Observer on Config receives every job event: an embedding service
// gets the same figures as `idem serve`'s /metrics.
func ExampleObserver() {
	dir, _ := os.MkdirTemp("", "idem-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(dir, "idem.db"), nil)
	if err != nil {
		panic(err)
	}
	defer st.Close()
	obs := &countingObserver{counts: map[idem.EventType]int{}}
	client, err := idem.NewClient(st, &idem.Config{DisableMaintenance: true, Observer: obs})
	if err != nil {
		panic(err)
	}
	opts := &idem.EnqueueOpts{IdempotencyKey: "welcome-ada"}
	for range 2 {
		if _, err := client.Enqueue(ctx, SendArgs{To: "ada@example.com"}, opts); err != nil {
			panic(err)
		}
	}
	fmt.Println(obs.counts[idem.EventEnqueued], obs.counts[idem.EventDeduplicated])
	// Output: 1 1
}
