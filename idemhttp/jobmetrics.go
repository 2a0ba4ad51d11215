package idemhttp

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemtype"
)

// DefaultMetricsMaxLabels bounds the distinct queues (and kinds) a
// JobMetrics labels by name; later ones are labelled "other".
const DefaultMetricsMaxLabels = 50

// otherLabel replaces queue and kind names beyond the bound.
const otherLabel = "other"

// JobMetrics is an idem.Observer that counts job events for Prometheus:
// idem_jobs_{enqueued,deduplicated,claimed,completed,failed,retried,dead,rescued}_total,
// idem_cache_{hits,misses}_total and the idem_job_{wait,run}_seconds
// histograms, labelled by queue and kind only (never tenant or job id).
// It is also an idem.MaintenanceObserver: idem_maintenance_runs_total
// (by service and outcome), idem_maintenance_rows_total and
// idem_maintenance_last_run_timestamp_seconds (by service) count the runs
// of the leader's maintenance services, retention (the cleanup) included.
// Set it as idem.Config.Observer and register it on Server.Registry().
type JobMetrics struct {
	counters map[string]*prometheus.CounterVec
	wait     *prometheus.HistogramVec
	run      *prometheus.HistogramVec
	// Maintenance runs, labelled by service (and outcome: ok or error).
	maintRuns, maintRows *prometheus.CounterVec
	maintLast            *prometheus.GaugeVec

	mu     sync.Mutex
	max    int
	queues map[string]bool
	kinds  map[string]bool
}

// NewJobMetrics returns the metrics; maxLabels <= 0 uses DefaultMetricsMaxLabels.
func NewJobMetrics(maxLabels int) *JobMetrics {
	if maxLabels <= 0 {
		maxLabels = DefaultMetricsMaxLabels
	}
	m := &JobMetrics{counters: map[string]*prometheus.CounterVec{}, max: maxLabels,
		queues: map[string]bool{}, kinds: map[string]bool{}}
	for name, help := range map[string]string{
		"jobs_enqueued_total":     "Jobs inserted.",
		"jobs_deduplicated_total": "Enqueues answered by an existing job of the same idempotency key.",
		"jobs_claimed_total":      "Jobs claimed by a worker.",
		"jobs_completed_total":    "Attempts that completed (run or from the cache).",
		"jobs_failed_total":       "Attempts that failed (retried or dead).",
		"jobs_retried_total":      "Failed attempts scheduled for a retry.",
		"jobs_dead_total":         "Jobs moved to the dead-letter queue (by a failed attempt, or by the rescuer when the last attempt's lease expired).",
		"cache_hits_total":        "Keyed jobs answered from a cached result.",
		"cache_misses_total":      "Keyed jobs that ran because nothing was cached.",
		"jobs_rescued_total":      "Jobs whose expired lease the rescuer took back.",
	} {
		m.counters[name] = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idem", Name: name, Help: help},
			[]string{"queue", "kind"})
	}
	buckets := prometheus.ExponentialBuckets(0.001, 4, 12) // 1 ms … ~70 min
	m.wait = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "idem", Name: "job_wait_seconds",
		Help: "Time from a job's run_at to its claim.", Buckets: buckets}, []string{"queue", "kind"})
	m.run = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "idem", Name: "job_run_seconds",
		Help: "Duration of finished attempts.", Buckets: buckets}, []string{"queue", "kind"})
	m.maintRuns = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idem", Name: "maintenance_runs_total",
		Help: "Runs of the maintenance services on this node (while it leads), by outcome ok or error."},
		[]string{"service", "outcome"})
	m.maintRows = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "idem", Name: "maintenance_rows_total",
		Help: "Rows the maintenance services touched: deleted by retention, rescued, promoted, fired."}, []string{"service"})
	m.maintLast = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "idem", Name: "maintenance_last_run_timestamp_seconds",
		Help: "Unix time of the service's last successful run on this node."}, []string{"service"})
	return m
}

// ObserveMaintenance implements idem.MaintenanceObserver.
func (m *JobMetrics) ObserveMaintenance(e *idem.MaintenanceEvent) {
	outcome := "ok"
	if e.Err != nil {
		outcome = "error"
	}
	m.maintRuns.WithLabelValues(e.Service, outcome).Inc()
	m.maintRows.WithLabelValues(e.Service).Add(float64(e.Rows)) // a failed run counts what it did first
	if e.Err == nil {
		m.maintLast.WithLabelValues(e.Service).Set(float64(e.At.UnixNano()) / 1e9)
	}
}

// bound returns name, or "other" once max distinct names were seen.
func (m *JobMetrics) bound(seen map[string]bool, name string) string {
	if seen[name] {
		return name
	}
	if len(seen) >= m.max {
		return otherLabel
	}
	seen[name] = true
	return name
}

// labels returns the bounded queue and kind labels of e.
func (m *JobMetrics) labels(e *idem.JobEvent) (string, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.bound(m.queues, e.Queue), m.bound(m.kinds, e.Kind)
}

// ObserveJob implements idem.Observer.
func (m *JobMetrics) ObserveJob(e *idem.JobEvent) {
	q, k := m.labels(e)
	inc := func(name string) { m.counters[name].WithLabelValues(q, k).Inc() }
	switch e.Type {
	case idem.EventEnqueued:
		inc("jobs_enqueued_total")
	case idem.EventDeduplicated:
		inc("jobs_deduplicated_total")
	case idem.EventClaimed:
		inc("jobs_claimed_total")
		m.wait.WithLabelValues(q, k).Observe(e.Wait.Seconds())
	case idem.EventCacheHit:
		inc("cache_hits_total")
	case idem.EventCacheMiss:
		inc("cache_misses_total")
	case idem.EventRescued:
		inc("jobs_rescued_total")
		if e.State == idemtype.StateDead { // its last attempt was lost: it went to the dead-letter queue
			inc("jobs_dead_total")
		}
	case idem.EventFinished:
		m.finished(e, q, k)
	}
}

func (m *JobMetrics) finished(e *idem.JobEvent, q, k string) {
	inc := func(name string) { m.counters[name].WithLabelValues(q, k).Inc() }
	switch e.Outcome {
	case idemtype.OutcomeCompleted, idemtype.OutcomeCached:
		inc("jobs_completed_total")
	case idemtype.OutcomeFailed, idemtype.OutcomeDead:
		inc("jobs_failed_total")
	}
	switch e.State {
	case idemtype.StateRetryable:
		inc("jobs_retried_total")
	case idemtype.StateDead:
		inc("jobs_dead_total")
	}
	if e.Outcome != idemtype.OutcomeCached && e.Outcome != idemtype.OutcomeSnoozed {
		m.run.WithLabelValues(q, k).Observe(e.Run.Seconds())
	}
}

// Describe implements prometheus.Collector.
func (m *JobMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.counters {
		c.Describe(ch)
	}
	m.wait.Describe(ch)
	m.run.Describe(ch)
	m.maintRuns.Describe(ch)
	m.maintRows.Describe(ch)
	m.maintLast.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *JobMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.counters {
		c.Collect(ch)
	}
	m.wait.Collect(ch)
	m.run.Collect(ch)
	m.maintRuns.Collect(ch)
	m.maintRows.Collect(ch)
	m.maintLast.Collect(ch)
}
