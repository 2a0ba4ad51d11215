package maintenance_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/maintenance"
	"github.com/idem-dev/idem/store"
)

// TestRescuerRescuesExactlyExpiredLeases: of six running jobs, the four
// whose lease ended are returned to retryable with store.RescuedError and a
// lost attempt; the two with live leases stay running, untouched.
func TestRescuerRescuesExactlyExpiredLeases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	insert(t, st, base, 6, "")
	claim := func(n int, until time.Time) []*idemtype.JobRow {
		jobs, err := st.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, WorkerID: "w", Limit: n, LeaseUntil: until, Now: base})
		if err != nil || len(jobs) != n {
			t.Fatalf("claimed %d (%v), want %d", len(jobs), err, n)
		}
		return jobs
	}
	expired, live := claim(4, base.Add(time.Second)), claim(2, base.Add(time.Hour))
	clk := &clock{now: base.Add(time.Second + time.Microsecond)}
	r := maintenance.NewRescuer(st, &maintenance.Config{Now: clk.Now})
	if n, err := r.RunOnce(ctx); err != nil || n != len(expired) {
		t.Fatalf("rescued %d (%v), want the %d expired leases", n, err, len(expired))
	}
	for _, j := range expired {
		row, err := st.JobGet(ctx, &store.JobGetParams{ID: j.ID})
		if err != nil || row.State != idemtype.StateRetryable || row.LastError != store.RescuedError {
			t.Fatalf("expired lease of job %d: %+v (%v), want retryable with the rescue error", j.ID, row, err)
		}
		as, err := st.AttemptList(ctx, &store.AttemptListParams{JobID: j.ID})
		if err != nil || len(as) != 1 || as[0].Outcome != idemtype.OutcomeLost || as[0].Error != store.RescuedError {
			t.Fatalf("attempts of job %d: %+v (%v), want one lost", j.ID, as, err)
		}
	}
	for _, j := range live {
		row, err := st.JobGet(ctx, &store.JobGetParams{ID: j.ID})
		if err != nil || row.State != idemtype.StateRunning || row.LeaseToken != j.LeaseToken {
			t.Fatalf("live lease of job %d: %+v (%v), want running under its lease", j.ID, row, err)
		}
	}
	if n, err := r.RunOnce(ctx); err != nil || n != 0 {
		t.Fatalf("second run rescued %d (%v), want none", n, err)
	}
}

// TestPromoterMovesExactlyDueJobs: of five scheduled jobs, the three due at
// the clock's time become available and wake their queue; the two due
// later stay scheduled.
func TestPromoterMovesExactlyDueJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	var ps []*store.JobInsertParams
	for i := range 5 {
		runAt := base.Add(time.Minute)
		if i >= 3 {
			runAt = base.Add(time.Minute + time.Millisecond)
		}
		ps = append(ps, &store.JobInsertParams{Tenant: "t", Queue: "q", Kind: "k", Args: []byte("{}"), MaxAttempts: 2, RunAt: runAt})
	}
	res, err := st.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: ps, Now: base})
	if err != nil {
		t.Fatal(err)
	}
	var woken []string
	clk := &clock{now: base.Add(time.Minute)}
	p := maintenance.NewPromoter(st, &maintenance.Config{Now: clk.Now, OnPromote: func(q []string) { woken = append(woken, q...) }})
	if n, err := p.RunOnce(ctx); err != nil || n != 1 || len(woken) != 1 || woken[0] != "q" {
		t.Fatalf("promoted into %d queues (%v), woken %v; want queue q", n, err, woken)
	}
	for i, r := range res {
		row, err := st.JobGet(ctx, &store.JobGetParams{ID: r.Job.ID})
		want := idemtype.StateAvailable
		if i >= 3 {
			want = idemtype.StateScheduled
		}
		if err != nil || row.State != want {
			t.Fatalf("job %d (run at %s): %s (%v), want %s", i, ps[i].RunAt.Sub(base), row.State, err, want)
		}
	}
}

// TestRescuerBatches: the rescuer takes expired leases in batches of
// Config.Batch, tells OnRescue each batch's ids (every rescued job once)
// and wakes the queues once per run that rescued anything — also when the
// count is an exact multiple of the batch, so the last batch is empty.
func TestRescuerBatches(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 3, 4, 5} {
		t.Run(fmt.Sprint(n, " expired"), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st := openStore(t)
			insert(t, st, base, n, "")
			jobs, err := st.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, WorkerID: "w", Limit: n,
				LeaseUntil: base.Add(time.Second), Now: base})
			if err != nil || len(jobs) != n {
				t.Fatalf("claimed %d (%v)", len(jobs), err)
			}
			var batches [][]int64
			woken := 0
			r := maintenance.NewRescuer(st, &maintenance.Config{Now: (&clock{now: base.Add(time.Minute)}).Now, Batch: 2,
				OnRescue: func(_ context.Context, jobs []store.RescuedJob) {
					ids := make([]int64, 0, len(jobs))
					for _, j := range jobs {
						ids = append(ids, j.ID)
					}
					batches = append(batches, ids)
				},
				OnPromote: func(q []string) {
					if q != nil {
						t.Errorf("rescue woke %v, want every queue (nil)", q)
					}
					woken++
				}})
			got, err := r.RunOnce(ctx)
			if err != nil || got != n {
				t.Fatalf("rescued %d (%v), want %d", got, err, n)
			}
			seen := map[int64]bool{}
			for _, b := range batches {
				if len(b) == 0 || len(b) > 2 {
					t.Fatalf("batches %v, want 1 or 2 ids each", batches)
				}
				for _, id := range b {
					if seen[id] {
						t.Fatalf("job %d told twice: %v", id, batches)
					}
					seen[id] = true
				}
			}
			for _, j := range jobs {
				if !seen[j.ID] {
					t.Fatalf("job %d rescued but not told: %v", j.ID, batches)
				}
			}
			if woken != 1 {
				t.Fatalf("queues woken %d times, want once", woken)
			}
		})
	}
}
