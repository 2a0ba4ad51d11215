package producer_test

import (
	"context"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/producer"
	"github.com/idem-dev/idem/store"
)

// TestNoKindsClaimsNothing: a producer with an empty (not nil) kind list —
// a client started before any worker was registered — claims nothing. On
// SQLite an empty kind list claimed every kind, so each job of the queue
// was taken and failed ("no worker registered"), retried, and died, while
// PostgreSQL claimed none.
func TestNoKindsClaimsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	ids := b.insert(t, 1, "k")
	p, err := producer.New(b.store, b.exec, b.running, b.completer.SubmitThen, &producer.Config{
		Queue: "q", MaxWorkers: 1, FetchLimit: 10, PollInterval: time.Hour, LeaseDuration: time.Minute,
		WorkerID: "w", Kinds: func() []string { return []string{} }, Now: utcNow})
	if err != nil {
		t.Fatal(err)
	}
	p.TestSignals.Claimed.Init()
	t.Cleanup(p.Stop)
	_ = p.Start(ctx)
	if n := p.TestSignals.Claimed.WaitOrTimeout(t); n != 0 {
		t.Fatalf("a producer without kinds claimed %d jobs, want 0", n)
	}
	row, err := b.store.JobGet(ctx, &store.JobGetParams{ID: ids[0]})
	if err != nil {
		t.Fatal(err)
	}
	if row.State != idemtype.StateAvailable || row.Attempt != 0 {
		t.Fatalf("job %s at attempt %d, want available and never attempted", row.State, row.Attempt)
	}
}
