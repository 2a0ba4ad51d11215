package producer_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
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

// lineWriter sends each write (one slog record) on a channel.
type lineWriter chan string

func (w lineWriter) Write(p []byte) (int, error) {
	select {
	case w <- string(p):
	default: // the test reads the first records only
	}
	return len(p), nil
}

// TestClaimFailureGoesToTheConfiguredLogger: a claim that fails (the store
// is closed) is logged as a warning on Config.Logger, and the producer
// keeps running until Stop.
func TestClaimFailureGoesToTheConfiguredLogger(t *testing.T) {
	t.Parallel()
	b := setup(t)
	logs := make(lineWriter, 16)
	p, err := producer.New(b.store, b.exec, b.running, b.completer.SubmitThen, &producer.Config{
		Queue: "q", MaxWorkers: 1, FetchLimit: 1, PollInterval: time.Hour, LeaseDuration: time.Minute,
		WorkerID: "w", Now: utcNow, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.store.Close(); err != nil {
		t.Fatal(err)
	}
	_ = p.Start(context.Background())
	select {
	case line := <-logs:
		if !strings.Contains(line, "level=WARN") || !strings.Contains(line, "claim failed") {
			t.Fatalf("logged %q, want the claim failure", line)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the failed claim was not logged on the configured logger")
	}
	p.Stop()
}
