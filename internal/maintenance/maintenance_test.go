package maintenance_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/leadership"
	"github.com/idem-dev/idem/internal/maintenance"
	"github.com/idem-dev/idem/internal/sqlitetest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/sqlitestore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var base = time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.now = t }

func openStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), sqlitetest.Path(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func insert(t *testing.T, st store.Store, now time.Time, n int, key string) []*idemtype.JobRow {
	t.Helper()
	var ps []*store.JobInsertParams
	for i := range n {
		p := &store.JobInsertParams{Tenant: "t", Queue: "q", Kind: "k", Args: []byte("{}"), MaxAttempts: 2,
			RunAt: now, ResultTTL: time.Hour, DedupWindow: 90 * 24 * time.Hour}
		if key != "" && i == 0 {
			p.IdempotencyKey, p.Fingerprint = key, "fp"
		}
		ps = append(ps, p)
	}
	res, err := st.JobInsertMany(context.Background(), &store.JobInsertManyParams{Jobs: ps, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]*idemtype.JobRow, len(res))
	for i, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		rows[i] = r.Job
	}
	return rows
}

// claimAndComplete runs every available job to completion at now.
func claimAndComplete(t *testing.T, st store.Store, now time.Time, n int) {
	t.Helper()
	ctx := context.Background()
	jobs, err := st.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, WorkerID: "w", Limit: n, LeaseUntil: now.Add(time.Minute), Now: now})
	if err != nil || len(jobs) != n {
		t.Fatalf("claimed %d (%v), want %d", len(jobs), err, n)
	}
	var fins []*store.JobFinishParams
	for _, j := range jobs {
		fins = append(fins, &store.JobFinishParams{ID: j.ID, LeaseToken: j.LeaseToken, State: idemtype.StateCompleted,
			Outcome: idemtype.OutcomeCompleted, FinishedAt: now, RecordResult: []byte("1"), ResultHash: "h"})
	}
	if _, err := st.JobFinishMany(ctx, fins); err != nil {
		t.Fatal(err)
	}
}

func TestRetentionDeletesInBatchesAndKeepsOpenKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	clk := &clock{now: base}
	rows := insert(t, st, base, 25, "kept-key")
	claimAndComplete(t, st, base, 25)
	r := maintenance.NewRetention(st, &maintenance.Config{Now: clk.Now, Batch: 10,
		CompletedRetention: 30 * 24 * time.Hour, CancelledRetention: 30 * 24 * time.Hour})
	if n, err := r.RunOnce(ctx); err != nil || n != 0 {
		t.Fatalf("nothing is old yet: deleted %d (%v)", n, err)
	}
	clk.Set(base.Add(31 * 24 * time.Hour))
	n, err := r.RunOnce(ctx)
	if err != nil || n != 25 {
		t.Fatalf("deleted %d (%v), want the 24 jobs without an open dedup window and the kept key's expired result (1 h TTL) emptied", n, err)
	}
	if _, err := st.JobGet(ctx, &store.JobGetParams{Tenant: "t", ID: rows[0].ID}); err != nil {
		t.Fatalf("the keyed job inside its 90-day window was deleted: %v", err)
	}
	clk.Set(base.Add(91 * 24 * time.Hour))
	if n, err := r.RunOnce(ctx); err != nil || n != 2 {
		t.Fatalf("after the window: deleted %d rows (%v), want the job and its expired record", n, err)
	}
}

func TestRescuerReturnsExpiredLeases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	clk := &clock{now: base}
	insert(t, st, base, 3, "")
	jobs, err := st.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, WorkerID: "w", Limit: 3, LeaseUntil: base.Add(time.Second), Now: base})
	if err != nil || len(jobs) != 3 {
		t.Fatal(err)
	}
	woken := 0
	r := maintenance.NewRescuer(st, &maintenance.Config{Now: clk.Now, OnPromote: func([]string) { woken++ }})
	if n, _ := r.RunOnce(ctx); n != 0 {
		t.Fatalf("rescued %d live leases", n)
	}
	clk.Set(base.Add(2 * time.Second))
	if n, err := r.RunOnce(ctx); err != nil || n != 3 || woken != 1 {
		t.Fatalf("rescued %d (%v), woken %d", n, err, woken)
	}
	row, _ := st.JobGet(ctx, &store.JobGetParams{Tenant: "t", ID: jobs[0].ID})
	if row.State != idemtype.StateRetryable || row.Attempt != 1 {
		t.Fatalf("rescued job: %s attempt %d", row.State, row.Attempt)
	}
}

func TestServicesStartAndStop(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	cfg := &maintenance.Config{Interval: time.Millisecond}
	for i, s := range []interface {
		Start(context.Context) error
		Stop()
		Started() <-chan struct{}
		Stopped() <-chan struct{}
	}{maintenance.NewRescuer(st, cfg), maintenance.NewPromoter(st, cfg), maintenance.NewRetention(st, cfg)} {
		if err := s.Start(context.Background()); err != nil {
			t.Fatalf("service %d: start: %v", i, err)
		}
		if err := s.Start(context.Background()); err != nil { // a second start is a no-op
			t.Fatalf("service %d: second start: %v", i, err)
		}
		select {
		case <-s.Started():
		case <-time.After(10 * time.Second):
			t.Fatalf("service %d never started", i)
		}
		s.Stop()
		select {
		case <-s.Stopped():
		default:
			t.Fatalf("service %d: Stop returned before its loop ended", i)
		}
		s.Stop() // idempotent
	}
}

func TestLeaderElection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	clk := &clock{now: base}
	a := leadership.New(st, leadership.Config{Owner: "a", TTL: 10 * time.Second, Now: clk.Now})
	b := leadership.New(st, leadership.Config{Owner: "b", TTL: 10 * time.Second, Now: clk.Now})
	if ok, err := a.RunOnce(ctx); !ok || err != nil {
		t.Fatalf("a: %v %v", ok, err)
	}
	if ok, _ := b.RunOnce(ctx); ok || b.IsLeader() {
		t.Fatal("b leads while a's term is live")
	}
	clk.Set(base.Add(11 * time.Second)) // a died: its term ran out
	if ok, _ := b.RunOnce(ctx); !ok || !b.IsLeader() {
		t.Fatal("b did not take over after a's term expired")
	}
	if ok, _ := a.RunOnce(ctx); ok {
		t.Fatal("a leads again while b's term is live")
	}
}

func TestServiceLoopSignals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	clk := &clock{now: base}
	insert(t, st, base, 2, "")
	if _, err := st.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, WorkerID: "w", Limit: 2,
		LeaseUntil: base.Add(time.Second), Now: base}); err != nil {
		t.Fatal(err)
	}
	clk.Set(base.Add(time.Minute))
	var leader atomic.Bool
	r := maintenance.NewRescuer(st, &maintenance.Config{Now: clk.Now, Interval: time.Millisecond, IsLeader: leader.Load})
	r.TestSignals.Ran.Init()
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	if n := r.TestSignals.Ran.WaitOrTimeout(t); n != -1 {
		t.Fatalf("a follower ran: %d", n)
	}
	leader.Store(true)
	for {
		n := r.TestSignals.Ran.WaitOrTimeout(t)
		if n == 2 {
			break // the first run as leader rescued both expired leases
		}
		if n != -1 {
			t.Fatalf("rescued %d, want 2", n)
		}
	}
	r.Stop()
	<-r.Stopped()
}
