package idem_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// changeAfterRescue is a real store whose JobRescue, once committed, is
// followed by then on each job it rescued: another node's change (an
// operator's `idem dlq requeue`, a worker's claim) landing between the
// rescue and its report.
type changeAfterRescue struct {
	store.Store
	then func(ctx context.Context, id int64)
}

func (s *changeAfterRescue) JobRescue(ctx context.Context, p *store.JobRescueParams) ([]store.RescuedJob, error) {
	jobs, err := s.Store.JobRescue(ctx, p)
	for _, j := range jobs {
		s.then(ctx, j.ID)
	}
	return jobs, err
}

// metricsOnRescue forwards every event to JobMetrics and hands on the
// rescued ones once the metrics have seen them.
type metricsOnRescue struct {
	*idemhttp.JobMetrics
	rescued chan *idem.JobEvent
}

func (o *metricsOnRescue) ObserveJob(e *idem.JobEvent) {
	o.JobMetrics.ObserveJob(e)
	if e.Type == idem.EventRescued {
		o.rescued <- e
	}
}

// counterValue returns the value of counter name labelled queue and kind
// in reg (0 when absent).
func counterValue(t *testing.T, reg *prometheus.Registry, name, queue, kind string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["queue"] == queue && labels["kind"] == kind {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestRescueReportsStateAtRescue: the rescued event carries the job as the
// rescue left it — its queue, kind and the state the rescue gave it — not
// as a read after the commit finds it, so JobMetrics counts a job rescued
// into the dead-letter queue once in idem_jobs_dead_total, under its queue
// and kind, whatever happens to it before the report: requeued (it was
// reported with its new state, never counted dead), deleted (reported
// unlabelled), or, rescued to retryable, claimed again and failed dead
// (reported dead by the rescue too: counted dead twice).
func TestRescueReportsStateAtRescue(t *testing.T) {
	t.Parallel()
	kind := (SendArgs{}).Kind()
	for _, tc := range []struct {
		name        string
		maxAttempts int
		then        func(t *testing.T, ctx context.Context, other *idem.Client, raw store.Store, id int64)
		state       idem.JobState
		dead        float64 // idem_jobs_dead_total{queue="mail"} once reported
	}{
		{"dead_then_requeued", 1, func(t *testing.T, ctx context.Context, other *idem.Client, _ store.Store, id int64) {
			if _, err := other.JobRetry(ctx, "", id, time.Time{}); err != nil {
				t.Error(err)
			}
		}, idem.StateDead, 1},
		{"dead_then_deleted", 1, func(t *testing.T, ctx context.Context, other *idem.Client, _ store.Store, id int64) {
			if err := other.DLQDelete(ctx, "", id); err != nil {
				t.Error(err)
			}
		}, idem.StateDead, 1},
		{"retryable_then_failed_dead", 2, func(t *testing.T, ctx context.Context, other *idem.Client, raw store.Store, id int64) {
			if _, err := raw.JobPromote(ctx, &store.JobPromoteParams{Now: time.Now().Add(time.Hour)}); err != nil {
				t.Error(err)
				return
			}
			jobs, err := other.Claim(ctx, idem.ClaimParams{Queues: []string{"mail"}, WorkerID: "w2", Lease: time.Hour})
			if err != nil || len(jobs) != 1 || jobs[0].ID != id {
				t.Errorf("claim again: %d %v", len(jobs), err)
				return
			}
			if _, err := other.Fail(ctx, "", id, jobs[0].LeaseToken, idem.FailParams{Error: "boom", NoRetry: true}); err != nil {
				t.Error(err)
			}
		}, idem.StateRetryable, 1}, // the failure's dead, not the rescue's too
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			raw, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "idem.db"), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			var offset atomic.Int64
			now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
			obs := &metricsOnRescue{JobMetrics: idemhttp.NewJobMetrics(0), rescued: make(chan *idem.JobEvent, 4)}
			reg := prometheus.NewRegistry()
			if err := reg.Register(obs.JobMetrics); err != nil {
				t.Fatal(err)
			}
			// The other node reports to the same metrics (the failure's dead).
			other, err := idem.NewClient(raw, &idem.Config{Now: now, Observer: obs.JobMetrics, DisableMaintenance: true})
			if err != nil {
				t.Fatal(err)
			}
			st := &changeAfterRescue{Store: raw, then: func(ctx context.Context, id int64) { tc.then(t, ctx, other, raw, id) }}
			client, err := idem.NewClient(st, &idem.Config{Now: now, Observer: obs, RescueInterval: 20 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			res, err := client.Enqueue(ctx, SendArgs{To: "ada@example.com"}, &idem.EnqueueOpts{Queue: "mail", MaxAttempts: tc.maxAttempts})
			if err != nil {
				t.Fatal(err)
			}
			defer abandonLease(ctx, t, client, &offset)()
			select {
			case e := <-obs.rescued:
				if e.JobID != res.Job.ID || e.Queue != "mail" || e.Kind != kind || e.Attempt != 1 || e.State != tc.state {
					t.Errorf("rescued event %+v, want job %d of queue mail, kind %s, attempt 1, state %s (the rescue's)",
						e, res.Job.ID, kind, tc.state)
				}
			case <-time.After(10 * time.Second): // the rescuer runs every 20 ms
				t.Fatal("no rescued event")
			}
			if got := counterValue(t, reg, "idem_jobs_dead_total", "mail", kind); got != tc.dead {
				t.Errorf("idem_jobs_dead_total{queue=mail} = %v, want %v", got, tc.dead)
			}
			if got := counterValue(t, reg, "idem_jobs_dead_total", "", ""); got != 0 {
				t.Errorf("idem_jobs_dead_total unlabelled = %v, want 0", got)
			}
		})
	}
}
