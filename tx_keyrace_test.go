package idem_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem"
)

// TestEnqueueTxSameKeyInTwoTransactions: two open PostgreSQL transactions
// enqueue the same key; the second waits on the first. When the first
// commits, the second is answered with the first's job (one job, one
// record); when the first rolls back, the second creates the job.
func TestEnqueueTxSameKeyInTwoTransactions(t *testing.T) {
	t.Parallel()
	for _, first := range []string{"commit", "rollback"} {
		t.Run(first, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b, pool, schema := pgSetup(t, nil)
			item := []idem.EnqueueParams{{Kind: "k", Args: json.RawMessage(`{}`), Opts: &idem.EnqueueOpts{IdempotencyKey: "race"}}}
			tx1, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx1.Rollback(ctx) }()
			r1, err := idem.EnqueueTx(ctx, b.client, tx1, item)
			if err != nil || r1[0].Err != nil {
				t.Fatalf("first: %v %+v", err, r1)
			}
			type answer struct {
				res []idem.EnqueueResult
				err error
			}
			second := make(chan answer, 1)
			go func() {
				var res []idem.EnqueueResult
				err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					var err error
					res, err = idem.EnqueueTx(ctx, b.client, tx, item)
					return err
				})
				second <- answer{res, err}
			}()
			// The second waits on the first's key (a lock wait of a query
			// on this test's schema) before the first ends.
			deadline := time.Now().Add(waitTimeout)
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for {
				var n int
				if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
					WHERE wait_event_type = 'Lock' AND strpos(query, $1) > 0`, schema).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n > 0 {
					break
				}
				select {
				case a := <-second:
					t.Fatalf("the second transaction did not wait for the first: %+v %v", a.res, a.err)
				default:
				}
				if time.Now().After(deadline) {
					t.Fatal("the second transaction never waited on the first")
				}
				<-tick.C
			}
			if first == "commit" {
				err = tx1.Commit(ctx)
			} else {
				err = tx1.Rollback(ctx)
			}
			if err != nil {
				t.Fatal(err)
			}
			a := <-second
			if a.err != nil || a.res[0].Err != nil {
				t.Fatalf("second: %v %+v", a.err, a.res)
			}
			jobs, _, err := b.client.JobList(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(jobs) != 1 || jobs[0].ID != a.res[0].Job.ID {
				t.Fatalf("jobs after both: %d, second answered job %d existing %v", len(jobs), a.res[0].Job.ID, a.res[0].Existing)
			}
			wantExisting := first == "commit"
			if a.res[0].Existing != wantExisting || (wantExisting && a.res[0].Job.ID != r1[0].Job.ID) {
				t.Fatalf("second answered %+v, want existing %v (first job %d)", a.res[0], wantExisting, r1[0].Job.ID)
			}
			rec, err := b.client.RecordGet(ctx, "", "race")
			if err != nil || rec.JobID != a.res[0].Job.ID {
				t.Fatalf("record: %+v %v", rec, err)
			}
		})
	}
}
