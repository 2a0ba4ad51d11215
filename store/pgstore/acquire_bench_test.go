package pgstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/store"
)

// BenchmarkRecordAcquire100 takes the execution leases of 100 distinct keys,
// as a claim of 100 keyed jobs does: "set" is one statement for all
// (qRecordAcquireMany, no explicit transaction), "each" one statement per
// key in one round trip inside a transaction (qRecordAcquire), the path for
// batches naming a key twice and the only one before.
// "existing" keys have a record already whose lease is free (a keyed job's
// record from its insert), as in keyed work.
func BenchmarkRecordAcquire100(b *testing.B) {
	for _, bc := range []struct {
		mode     string
		existing bool
	}{{"set", false}, {"each", false}, {"set", true}, {"each", true}} {
		mode := bc.mode
		name := mode + "/new"
		if bc.existing {
			name = mode + "/existing"
		}
		b.Run(name, func(b *testing.B) {
			s := newTestStoreCfg(b, 4, &Config{})
			now := time.Now()
			ps := make([]*store.RecordAcquireParams, 100)
			order := make([]int, 100)
			n := 0
			b.ResetTimer()
			for range b.N {
				for i := range ps {
					n++
					ps[i] = &store.RecordAcquireParams{Tenant: "default", Key: fmt.Sprintf("k%09d", n), Owner: "w",
						JobID: int64(n), LeaseUntil: now.Add(time.Minute), DedupUntil: now.Add(time.Hour),
						ExpiresAt: now.Add(24 * time.Hour), Now: now}
					order[i] = i
				}
				if bc.existing {
					b.StopTimer()
					pre := make([]*store.RecordAcquireParams, len(ps))
					for i, p := range ps {
						q := *p
						q.Owner, q.LeaseUntil = "enqueue", now.Add(-time.Second)
						pre[i] = &q
					}
					if _, err := s.RecordAcquireMany(b.Context(), pre); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				out := make([]*store.RecordAcquireResult, len(ps))
				var err error
				if mode == "set" { // as RecordAcquireMany runs it: one statement, no transaction
					_, err = s.acquireSet(b.Context(), s.pool, ps, order, out)
				} else {
					err = s.tx(b.Context(), func(tx pgx.Tx) error {
						_, err := s.acquireEach(b.Context(), tx, ps, order, out)
						return err
					})
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			reportJobs(b, 100*b.N)
		})
	}
}
