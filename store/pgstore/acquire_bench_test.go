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
// key in one round trip inside a transaction (qRecordAcquireMany for one
// key), the path for batches naming a key twice and the only one before.
// "existing" keys have a record already whose lease is free and whose job
// does not run; "own" keys are those of 100 claimed keyed jobs, acquired by
// their jobs, as in keyed work: read, not written (the derived lease).
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
			benchAcquire100(b, mode, bc.existing)
		})
	}
	b.Run("set/own", func(b *testing.B) { benchAcquireOwn100(b, false) })
	b.Run("set/own-full-statement", func(b *testing.B) { benchAcquireOwn100(b, true) })
}

// benchAcquireOwn100 acquires the keys of 100 claimed keyed jobs, each by
// its job (the executor's AcquireKeys).
// fullOnly: with the full statement alone (before the read of own keys).
func benchAcquireOwn100(b *testing.B, fullOnly bool) {
	s := newTestStoreCfg(b, 4, &Config{})
	s.acquireFullOnly = fullOnly
	now := time.Now()
	n := 0
	order := make([]int, 100)
	for i := range order {
		order[i] = i
	}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		jobs := make([]*store.JobInsertParams, 100)
		for i := range jobs {
			n++
			jobs[i] = &store.JobInsertParams{Tenant: "default", Queue: "q", Kind: "k", Args: []byte("{}"), MaxAttempts: 3,
				RunAt: now, IdempotencyKey: fmt.Sprintf("k%09d", n), DedupWindow: time.Hour, ResultTTL: time.Hour}
		}
		if _, err := s.JobInsertMany(b.Context(), &store.JobInsertManyParams{Jobs: jobs, Now: now}); err != nil {
			b.Fatal(err)
		}
		claimed, err := s.JobClaim(b.Context(), &store.JobClaimParams{Queues: []string{"q"}, WorkerID: "w", Limit: 100,
			LeaseUntil: now.Add(time.Minute), Now: now})
		if err != nil || len(claimed) != 100 {
			b.Fatal(err, len(claimed))
		}
		ps := make([]*store.RecordAcquireParams, 100)
		for i, j := range claimed {
			ps[i] = &store.RecordAcquireParams{Tenant: j.Tenant, Key: j.IdempotencyKey, Owner: store.JobOwner(j.ID), JobID: j.ID,
				LeaseUntil: *j.LeaseExpiresAt, DedupUntil: now, ExpiresAt: now.Add(time.Hour), Now: now}
		}
		b.StartTimer()
		out := make([]*store.RecordAcquireResult, len(ps))
		held, err := s.acquireSet(b.Context(), s.pool, ps, order, out)
		if err != nil || len(held) != 0 {
			b.Fatal(err, len(held))
		}
	}
	reportJobs(b, 100*b.N)
}

// benchAcquire100 is one "new" or "existing" case of BenchmarkRecordAcquire100.
func benchAcquire100(b *testing.B, mode string, existing bool) {
	bc := struct{ existing bool }{existing}
	{
		{
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
		}
	}
}
