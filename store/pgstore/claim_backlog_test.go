package pgstore

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store"
)

// TestClaimCostFlatWithWaitingBacklog: the buffers a claim touches do not
// grow with the jobs waiting for a later run_at in its queue (scheduled
// for tomorrow, or retrying with a long backoff). Before migration 0031
// the claim index held them in (queue, tenant, priority DESC, run_at, id)
// order and every probe for a tenant's first due job read past all of
// its not-yet-due ones: with 100,000 such jobs an empty claim took 16 ms
// instead of 0.3 ms. For each claim path (one queue without flow rows,
// two queues, a queue under a concurrency limit) and the promoter, it
// counts the buffers of the jobs table and its indexes (pg_statio, flushed
// with pg_stat_force_next_flush on the store's only connection) that an
// empty claim touches (the least of five), with 300 and with 15,000
// waiting jobs. A count, not a timing.
func TestClaimCostFlatWithWaitingBacklog(t *testing.T) {
	t.Parallel()
	dbtest.PostgresURL(t)
	paths := []struct {
		name   string
		queues []string
		limit  bool
	}{
		{"one queue", []string{"default"}, false},
		{"two queues", []string{"default", "other"}, false},
		{"concurrency limit", []string{"default"}, true},
	}
	cost := func(backlog int) map[string]int64 {
		s := newTestStore(t, 1)
		ctx := t.Context()
		now := time.Now().UTC()
		for b := 0; b < backlog; b += 1000 {
			var ps []*store.JobInsertParams
			for i := b; i < min(b+1000, backlog); i++ {
				ps = append(ps, &store.JobInsertParams{Tenant: fmt.Sprint("t", i%3), Queue: "default", Kind: "k",
					Args: json.RawMessage(`{}`), MaxAttempts: 3, RunAt: now.Add(24*time.Hour + time.Duration(i)*time.Second)})
			}
			if _, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: ps, Now: now}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.pool.Exec(ctx, s.sql("VACUUM ANALYZE {schema}.jobs")); err != nil {
			t.Fatal(err)
		}
		// touched: the buffers of jobs and its indexes read so far by the
		// store's one backend, this statement's own flushed first.
		touched := func() int64 {
			if _, err := s.pool.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
				t.Fatal(err)
			}
			var n int64
			if err := s.pool.QueryRow(ctx, `SELECT coalesce(sum(heap_blks_hit + heap_blks_read + coalesce(idx_blks_hit, 0) + coalesce(idx_blks_read, 0)), 0)
FROM pg_statio_user_tables WHERE schemaname = $1 AND relname = 'jobs'`, s.schema).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		out := map[string]int64{}
		for _, p := range paths {
			if p.limit {
				if _, err := s.LimitPut(ctx, &store.LimitPutParams{Limit: store.Limit{FlowScope: store.FlowScope{Tenant: "t1", Queue: "default"}, Concurrency: 5}, Now: now}); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 6 {
				before := touched()
				jobs, err := s.JobClaim(ctx, &store.JobClaimParams{Queues: p.queues, WorkerID: "w", Limit: 10,
					LeaseUntil: now.Add(time.Minute), Now: now})
				if err != nil {
					t.Fatalf("%s: %v", p.name, err)
				}
				if len(jobs) != 0 {
					t.Fatalf("%s: claimed %d jobs not yet due", p.name, len(jobs))
				}
				// The least of claims 2 to 6: the first may plan with
				// catalog reads, and a statement planned again (or the
				// store's own background statements on its connection)
				// adds to one claim, while a cost of the backlog adds to
				// every one.
				if n := touched() - before; i > 0 && (i == 1 || n < out[p.name]) {
					out[p.name] = n
				}
			}
		}
		before := touched()
		if _, err := s.JobPromote(ctx, &store.JobPromoteParams{Now: now, Limit: 100}); err != nil {
			t.Fatal(err)
		}
		out["promoter"] = touched() - before
		return out
	}
	small, big := cost(300), cost(15000)
	for name, n := range big {
		t.Logf("%s: %d buffers with 300 waiting jobs, %d with 15,000", name, small[name], n)
		if n > small[name]+5 {
			t.Errorf("%s: %d buffers with 15,000 waiting jobs against %d with 300: the cost grows with the backlog", name, n, small[name])
		}
	}
}
