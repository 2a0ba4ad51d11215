package producer_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/completer"
	"github.com/idem-dev/idem/internal/maintenance"
	"github.com/idem-dev/idem/internal/producer"
	"github.com/idem-dev/idem/store"
)

// TestFinishSlowerThanLeaseKeepsTheLease: a job whose handler returned keeps
// its lease until the completer has written its finish, however long that
// takes. The completer here starts 2 leases after the handler returned
// (as a completer stuck behind a slow store would), while the real
// heartbeater renews and a real rescuer runs every 50 ms. Overlap: the
// completer is started only after the handler has returned and the pause
// has passed, so the finish waits in it for the whole pause. The job
// completes in attempt 1, its handler ran once. Before the runtime fix the
// job left the heartbeat set when its handler returned: the rescuer took it
// back (a lost attempt) and the late finish was refused as lease-lost.
func TestFinishSlowerThanLeaseKeepsTheLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// 2 s: renewals every 667 ms, each allowed 667 ms, so a loaded machine's
	// scheduling hiccups do not lapse the lease of a live worker.
	const lease = 2 * time.Second
	b := setup(t)
	var runs atomic.Int32
	returned := make(chan struct{}, 1)
	b.handle("k", func(context.Context, *idemtype.JobRow) (json.RawMessage, error) {
		runs.Add(1)
		returned <- struct{}{}
		return json.RawMessage(`"done"`), nil
	})
	ids := b.insert(t, 1, "k")
	slow := completer.New(b.store, nil)
	t.Cleanup(slow.Stop)
	settled := make(chan struct{}, 1) // the finish was written or refused
	submit := func(fin *store.JobFinishParams, written, then func()) {
		slow.SubmitThen(fin, written, func() { then(); settled <- struct{}{} })
	}
	p, err := producer.New(b.store, b.exec, b.running, submit, &producer.Config{
		Queue: "q", MaxWorkers: 1, FetchLimit: 1, PollInterval: time.Hour, LeaseDuration: lease,
		WorkerID: "w", Now: utcNow})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	hb := producer.NewHeartbeater(b.store, b.running, &producer.HeartbeaterConfig{LeaseDuration: lease})
	_ = hb.Start(ctx)
	t.Cleanup(hb.Stop)
	rescuer := maintenance.NewRescuer(b.store, &maintenance.Config{Interval: 50 * time.Millisecond})
	_ = rescuer.Start(ctx)
	t.Cleanup(rescuer.Stop)
	_ = p.Start(ctx)
	select {
	case <-returned:
	case <-time.After(30 * time.Second):
		t.Fatal("the handler never ran")
	}
	time.Sleep(2 * lease) // simulates a completer slower than 2 leases
	// A shutdown now must not give the lease back: the completer still
	// writes the finish (Stop drains it).
	if leases := b.running.Release(); len(leases) != 0 {
		t.Fatalf("shutdown would release %d leases of jobs whose finish is pending", len(leases))
	}
	_ = slow.Start(ctx)
	select {
	case <-settled:
	case <-time.After(30 * time.Second):
		t.Fatal("the finish was never written")
	}
	row, err := b.store.JobGet(ctx, &store.JobGetParams{Tenant: "t", ID: ids[0]})
	if err != nil {
		t.Fatal(err)
	}
	attempts, err := b.store.AttemptList(ctx, &store.AttemptListParams{JobID: ids[0]})
	if err != nil {
		t.Fatal(err)
	}
	first := idemtype.Outcome("none")
	if len(attempts) > 0 {
		first = attempts[0].Outcome
	}
	if row.State != idemtype.StateCompleted || row.Attempt != 1 || len(attempts) != 1 || runs.Load() != 1 {
		t.Fatalf("state %s attempt %d, %d attempts (first %q), %d handler runs; want completed in attempt 1, run once",
			row.State, row.Attempt, len(attempts), first, runs.Load())
	}
}
