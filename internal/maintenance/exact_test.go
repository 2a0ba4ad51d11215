package maintenance_test

import (
	"context"
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
