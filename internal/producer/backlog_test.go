package producer_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/producer"
)

// TestBacklogFillsFreeWorkersAtOnce: with a backlog, a full claim is
// followed at once by the next while enough workers are free, so 8
// workers fetching 2 at a time all get a job without any job finishing
// and without a poll (the interval is an hour). Handlers block until every
// one has started, so no finish wakes the producer.
func TestBacklogFillsFreeWorkersAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	const workers = 8
	started := make(chan struct{}, 3*workers) // every job sends once
	release := make(chan struct{})
	b.handle("k", func(context.Context, *idemtype.JobRow) (json.RawMessage, error) {
		started <- struct{}{}
		<-release
		return nil, nil
	})
	ids := b.insert(t, 3*workers, "k")
	p, err := producer.New(b.store, b.exec, b.running, b.completer.SubmitThen, &producer.Config{
		Queue: "q", MaxWorkers: workers, FetchLimit: 2, PollInterval: time.Hour, LeaseDuration: time.Minute,
		WorkerID: "w", Now: utcNow})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	_ = p.Start(ctx)
	timeout := time.After(30 * time.Second)
	for i := range workers {
		select {
		case <-started:
		case <-timeout:
			t.Fatalf("%d of %d workers got a job before any finished", i, workers)
		}
	}
	close(release)
	b.waitFinished(t, len(ids))
}
