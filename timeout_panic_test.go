package idem_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

// panicFinishObserver hands over every EventFinished.
type panicFinishObserver struct{ finished chan idem.JobEvent }

func (o *panicFinishObserver) ObserveJob(e *idem.JobEvent) {
	if e.Type == idem.EventFinished {
		o.finished <- *e
	}
}

// TestPanicAfterTimeoutIsReportedPanicked: a handler that panics once its
// job's timeout cancelled its context is reported to the Observer as
// panicked, and its attempt's error, a panic's ("panic: …"), names the
// timeout too. The timeout's wrapping put "job timed out after …" first,
// so EventFinished.Panicked (read from the error's "panic: " start) was
// false for it.
func TestPanicAfterTimeoutIsReportedPanicked(t *testing.T) {
	t.Parallel()
	obs := &panicFinishObserver{finished: make(chan idem.JobEvent, 1)}
	b := setup(t, &idem.Config{Queues: queues(1), Observer: obs, DisableMaintenance: true,
		Retry: idem.RetryPolicy{Delays: []time.Duration{time.Hour}, Jitter: -1}})
	b.workers.Handle("k", func(ctx context.Context, _ *idem.JobRow) (json.RawMessage, error) {
		<-ctx.Done()
		panic("boom")
	})
	b.start(t)
	res, err := b.client.EnqueueRaw(context.Background(), idem.EnqueueParams{Kind: "k",
		Opts: &idem.EnqueueOpts{Timeout: 20 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	var e idem.JobEvent
	select {
	case e = <-obs.finished:
	case <-time.After(waitTimeout):
		t.Fatal("the attempt did not finish")
	}
	if e.JobID != res.Job.ID || e.State != idem.StateRetryable || !e.Panicked {
		t.Fatalf("finished %+v, want the job retryable and Panicked", e)
	}
	first, _, _ := strings.Cut(e.Err, "\n")
	if first != "panic: boom (job timed out after 20ms)" {
		t.Fatalf("error's first line %q, want the panic and the timeout", first)
	}
}
