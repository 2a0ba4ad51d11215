package idemhttp

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// httpMetrics are the request metrics of one server.
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newHTTPMetrics(reg *prometheus.Registry, s *Server) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "idem_http_requests_total",
			Help: "HTTP requests by route and status code."}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "idem_http_request_duration_seconds",
			Help: "HTTP request latency by route.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, []string{"route"}),
	}
	s.storeMetrics = newStoreCollector(s)
	reg.MustRegister(m.requests, m.duration, s.storeMetrics,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// instrument counts and times the requests of one route. The route's
// series are looked up once each (at its first request, or first request
// with a status), not per request.
func (m *httpMetrics) instrument(route string, h http.Handler) http.Handler {
	duration := sync.OnceValue(func() prometheus.Observer { return m.duration.WithLabelValues(route) })
	var counters sync.Map // status code → prometheus.Counter
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		c, ok := counters.Load(sw.status)
		if !ok {
			c, _ = counters.LoadOrStore(sw.status, m.requests.WithLabelValues(route, strconv.Itoa(sw.status)))
		}
		c.(prometheus.Counter).Inc()
		duration().Observe(time.Since(start).Seconds())
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// storeCollector reports job counts and record stats from a snapshot that
// is at most Config.MetricsCacheTTL old: a scrape (or a flood of them, the
// endpoint needs no key) costs the store at most one pair of queries per
// TTL. At most Config.MetricsMaxQueues queues get their own series (the
// largest by job count); the rest are summed under the queue "other", so a
// tenant creating thousands of queues cannot create thousands of series.
type storeCollector struct {
	s                                                          *Server
	descJobs, descOldest, descRecords, descRecordBytes, descUp *prometheus.Desc
	// descExpired: records past their expiry awaiting retention (seed
	// 000's "expired entries", whose growth means cleanup is not running).
	descExpired *prometheus.Desc
	// descDLQ: dead jobs not marked resolved, per queue (idem_jobs'
	// dead count includes the resolved ones, kept for audit).
	descDLQ *prometheus.Desc
	// Flow control, labelled by the limit's scope ("" = any).
	descLimitRunning, descLimitWindow, descLimitMax, descThrottled *prometheus.Desc

	mu      sync.Mutex // held while refreshing: one refresh at a time
	snap    *metricsSnapshot
	queries int // store reads so far (tests)
}

// metricsSnapshot is what one refresh read.
type metricsSnapshot struct {
	at      time.Time
	up      bool
	queues  []*store.QueueStat
	records *store.RecordStats
	limits  []*store.Limit // nil when the store has no limits
}

// otherQueue is the label of the queues beyond Config.MetricsMaxQueues.
const otherQueue = "other"

func newStoreCollector(s *Server) *storeCollector {
	return &storeCollector{s: s,
		descJobs:        prometheus.NewDesc("idem_jobs", "Jobs by queue and state (every tenant).", []string{"queue", "state"}, nil),
		descOldest:      prometheus.NewDesc("idem_oldest_available_age_seconds", "Age of the oldest claimable job.", []string{"queue"}, nil),
		descRecords:     prometheus.NewDesc("idem_idempotency_records", "Live idempotency records.", nil, nil),
		descRecordBytes: prometheus.NewDesc("idem_idempotency_size_bytes", "Stored result bytes of live records.", nil, nil),
		descUp:          prometheus.NewDesc("idem_store_up", "1 when the store answered the last refresh.", nil, nil),
		descExpired: prometheus.NewDesc("idem_idempotency_expired_records",
			"Idempotency records (or their results) past their expiry, awaiting cleanup by retention.", nil, nil),
		descDLQ: prometheus.NewDesc("idem_dlq_unresolved", "Dead jobs not marked resolved, by queue (every tenant).",
			[]string{"queue"}, nil),
		descLimitRunning: prometheus.NewDesc("idem_limit_running", "Jobs running in the scope of a limit.",
			[]string{"tenant", "queue"}, nil),
		descLimitWindow: prometheus.NewDesc("idem_limit_window_used", "Jobs started in the current rate window of a limit.",
			[]string{"tenant", "queue"}, nil),
		descLimitMax: prometheus.NewDesc("idem_limit", "A limit's value: kind rate (per period_seconds) or concurrency.",
			[]string{"tenant", "queue", "kind", "period_seconds"}, nil),
		descThrottled: prometheus.NewDesc("idem_throttled_claims_total", "Claims that left work behind because of a limit (all nodes).",
			[]string{"tenant", "queue"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.descJobs, c.descOldest, c.descRecords, c.descRecordBytes, c.descUp, c.descExpired,
		c.descDLQ, c.descLimitRunning, c.descLimitWindow, c.descLimitMax, c.descThrottled} {
		ch <- d
	}
}

// snapshot returns a snapshot at most MetricsCacheTTL old, reading the
// store when the cached one is older.
func (c *storeCollector) snapshot() *metricsSnapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.s.now()
	if c.snap != nil && now.Sub(c.snap.at) < c.s.cfg.MetricsCacheTTL {
		return c.snap
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.queries++
	snap := &metricsSnapshot{at: now}
	stats, err := c.s.store.QueueStats(ctx, &store.QueueStatsParams{Tenant: "", Now: now})
	rs, err2 := c.s.store.RecordStats(ctx, &store.RecordStatsParams{Tenant: "", Now: now})
	if err == nil && err2 == nil {
		snap.up, snap.queues, snap.records = true, capQueues(stats, c.s.cfg.MetricsMaxQueues), rs
	}
	if limits, err := c.s.store.LimitList(ctx, &store.LimitListParams{Now: now}); err == nil {
		snap.limits = limits
	}
	c.snap = snap
	return snap
}

// capQueues keeps the max largest queues and sums the rest as otherQueue.
// A queue a user named otherQueue is always summed with the rest: kept
// apart, it would give two series of the same labels and fail the scrape.
func capQueues(stats []*store.QueueStat, max int) []*store.QueueStat {
	if len(stats) <= max {
		return stats
	}
	total := func(q *store.QueueStat) (n int64) {
		for _, v := range q.Counts {
			n += v
		}
		return n
	}
	sorted := slices.Clone(stats)
	slices.SortStableFunc(sorted, func(a, b *store.QueueStat) int {
		if a.Queue == otherQueue || b.Queue == otherQueue { // last, among the rest
			return cmp.Compare(boolInt(a.Queue == otherQueue), boolInt(b.Queue == otherQueue))
		}
		return cmp.Compare(total(b), total(a))
	})
	other := &store.QueueStat{Queue: otherQueue, Counts: map[idemtype.JobState]int64{}}
	for _, q := range sorted[max:] {
		for st, n := range q.Counts {
			other.Counts[st] += n
		}
		other.DeadUnresolved += q.DeadUnresolved
		if q.OldestAvailable != nil && (other.OldestAvailable == nil || q.OldestAvailable.Before(*other.OldestAvailable)) {
			other.OldestAvailable = q.OldestAvailable
		}
	}
	return append(sorted[:max:max], other)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Collect implements prometheus.Collector.
func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	snap := c.snapshot()
	if !snap.up {
		ch <- prometheus.MustNewConstMetric(c.descUp, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.descUp, prometheus.GaugeValue, 1)
	for _, q := range snap.queues {
		for _, st := range idemtype.AllStates {
			ch <- prometheus.MustNewConstMetric(c.descJobs, prometheus.GaugeValue, float64(q.Counts[st]), q.Queue, string(st))
		}
		age := 0.0
		if q.OldestAvailable != nil {
			age = max(0, snap.at.Sub(*q.OldestAvailable).Seconds())
		}
		ch <- prometheus.MustNewConstMetric(c.descOldest, prometheus.GaugeValue, age, q.Queue)
		ch <- prometheus.MustNewConstMetric(c.descDLQ, prometheus.GaugeValue, float64(q.DeadUnresolved), q.Queue)
	}
	ch <- prometheus.MustNewConstMetric(c.descRecords, prometheus.GaugeValue, float64(snap.records.Entries))
	ch <- prometheus.MustNewConstMetric(c.descRecordBytes, prometheus.GaugeValue, float64(snap.records.SizeBytes))
	ch <- prometheus.MustNewConstMetric(c.descExpired, prometheus.GaugeValue, float64(snap.records.Expired))
	c.collectLimits(ch, snap.limits)
}

// collectLimits reports each limit, its usage and its throttling count.
func (c *storeCollector) collectLimits(ch chan<- prometheus.Metric, limits []*store.Limit) {
	for _, l := range limits {
		ch <- prometheus.MustNewConstMetric(c.descLimitRunning, prometheus.GaugeValue, float64(l.Running), l.Tenant, l.Queue)
		ch <- prometheus.MustNewConstMetric(c.descThrottled, prometheus.CounterValue, float64(l.Throttled), l.Tenant, l.Queue)
		if l.Rate > 0 {
			ch <- prometheus.MustNewConstMetric(c.descLimitWindow, prometheus.GaugeValue, float64(l.WindowUsed), l.Tenant, l.Queue)
			ch <- prometheus.MustNewConstMetric(c.descLimitMax, prometheus.GaugeValue, float64(l.Rate), l.Tenant, l.Queue,
				"rate", strconv.FormatFloat(l.Period.Seconds(), 'f', -1, 64))
		}
		if l.Concurrency > 0 {
			ch <- prometheus.MustNewConstMetric(c.descLimitMax, prometheus.GaugeValue, float64(l.Concurrency), l.Tenant, l.Queue,
				"concurrency", "")
		}
	}
}

func (s *Server) metricsHandler(w http.ResponseWriter, r *http.Request) error {
	promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}).ServeHTTP(w, r)
	return nil
}
