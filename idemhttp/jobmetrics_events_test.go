package idemhttp_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/idemtype"
)

// TestJobMetricsPerEvent: each job event moves its series and only its
// own; cached and snoozed attempts do not count as run time.
func TestJobMetricsPerEvent(t *testing.T) {
	t.Parallel()
	m := idemhttp.NewJobMetrics(0)
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(m); err != nil {
		t.Fatal(err)
	}
	ev := func(typ idem.EventType, outcome idemtype.Outcome, state idemtype.JobState) *idem.JobEvent {
		return &idem.JobEvent{Type: typ, Queue: "mail", Kind: "send", Tenant: "acme", Outcome: outcome, State: state,
			Wait: 2 * time.Second, Run: 300 * time.Millisecond}
	}
	for _, e := range []*idem.JobEvent{
		ev(idem.EventEnqueued, "", ""),
		ev(idem.EventEnqueued, "", ""),
		ev(idem.EventDeduplicated, "", ""),
		ev(idem.EventClaimed, "", ""),
		ev(idem.EventCacheHit, "", ""),
		ev(idem.EventCacheMiss, "", ""),
		ev(idem.EventRescued, "", ""),
		ev(idem.EventFinished, idemtype.OutcomeCompleted, idemtype.StateCompleted),
		ev(idem.EventFinished, idemtype.OutcomeCached, idemtype.StateCompleted),
		ev(idem.EventFinished, idemtype.OutcomeFailed, idemtype.StateRetryable),
		ev(idem.EventFinished, idemtype.OutcomeDead, idemtype.StateDead),
		ev(idem.EventFinished, idemtype.OutcomeSnoozed, idemtype.StateScheduled),
		ev(idem.EventFinished, idemtype.OutcomeCancelled, idemtype.StateCancelled),
	} {
		m.ObserveJob(e)
	}
	want := map[string]float64{
		"idem_jobs_enqueued_total":     2,
		"idem_jobs_deduplicated_total": 1,
		"idem_jobs_claimed_total":      1,
		"idem_cache_hits_total":        1,
		"idem_cache_misses_total":      1,
		"idem_jobs_rescued_total":      1,
		"idem_jobs_completed_total":    2, // completed and cached
		"idem_jobs_failed_total":       2, // failed and dead
		"idem_jobs_retried_total":      1,
		"idem_jobs_dead_total":         1,
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	var waitCount, runCount uint64
	var waitSum float64
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "tenant" {
					t.Errorf("%s is labelled by tenant", mf.GetName())
				}
			}
			switch {
			case mt.GetCounter() != nil:
				got[mf.GetName()] += mt.GetCounter().GetValue()
			case mf.GetName() == "idem_job_wait_seconds":
				waitCount, waitSum = mt.GetHistogram().GetSampleCount(), mt.GetHistogram().GetSampleSum()
			case mf.GetName() == "idem_job_run_seconds":
				runCount = mt.GetHistogram().GetSampleCount()
			}
		}
	}
	for name, v := range want {
		if got[name] != v {
			t.Errorf("%s = %v, want %v", name, got[name], v)
		}
	}
	if waitCount != 1 || waitSum != 2 {
		t.Errorf("wait histogram: %d samples, sum %v; want 1 and 2s", waitCount, waitSum)
	}
	// Completed, failed, dead and cancelled attempts ran; cached and snoozed did not.
	if runCount != 4 {
		t.Errorf("run histogram: %d samples, want 4", runCount)
	}
}

func TestJobMetricsBoundLabels(t *testing.T) {
	t.Parallel()
	m := idemhttp.NewJobMetrics(2)
	for _, q := range []string{"a", "b", "c", "d", "a"} {
		m.ObserveJob(&idem.JobEvent{Type: idem.EventEnqueued, Queue: q, Kind: "k-" + q})
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(m); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "idem_jobs_enqueued_total" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			var labels []string
			for _, l := range mt.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			got[strings.Join(labels, ",")] = mt.GetCounter().GetValue()
		}
	}
	want := map[string]float64{"kind=k-a,queue=a": 2, "kind=k-b,queue=b": 1, "kind=other,queue=other": 2}
	if len(got) != len(want) {
		t.Fatalf("series %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
}
