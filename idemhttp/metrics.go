package idemhttp

import (
	"context"
	"net/http"
	"strconv"
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
	reg.MustRegister(m.requests, m.duration, newStoreCollector(s),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// instrument counts and times the requests of one route.
func (m *httpMetrics) instrument(route string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		m.requests.WithLabelValues(route, strconv.Itoa(sw.status)).Inc()
		m.duration.WithLabelValues(route).Observe(time.Since(start).Seconds())
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

// storeCollector reports job counts and record stats at scrape time.
type storeCollector struct {
	s                                                          *Server
	descJobs, descOldest, descRecords, descRecordBytes, descUp *prometheus.Desc
	// Flow control, labelled by the limit's scope ("" = any).
	descLimitRunning, descLimitWindow, descLimitMax, descThrottled *prometheus.Desc
}

func newStoreCollector(s *Server) *storeCollector {
	return &storeCollector{s: s,
		descJobs:        prometheus.NewDesc("idem_jobs", "Jobs by queue and state (every tenant).", []string{"queue", "state"}, nil),
		descOldest:      prometheus.NewDesc("idem_oldest_available_age_seconds", "Age of the oldest claimable job.", []string{"queue"}, nil),
		descRecords:     prometheus.NewDesc("idem_idempotency_records", "Live idempotency records.", nil, nil),
		descRecordBytes: prometheus.NewDesc("idem_idempotency_size_bytes", "Stored result bytes of live records.", nil, nil),
		descUp:          prometheus.NewDesc("idem_store_up", "1 when the store answered the scrape.", nil, nil),
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
	for _, d := range []*prometheus.Desc{c.descJobs, c.descOldest, c.descRecords, c.descRecordBytes, c.descUp,
		c.descLimitRunning, c.descLimitWindow, c.descLimitMax, c.descThrottled} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	now := c.s.now()
	stats, err := c.s.store.QueueStats(ctx, &store.QueueStatsParams{Tenant: "", Now: now})
	rs, err2 := c.s.store.RecordStats(ctx, &store.RecordStatsParams{Tenant: "", Now: now})
	if err != nil || err2 != nil {
		ch <- prometheus.MustNewConstMetric(c.descUp, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.descUp, prometheus.GaugeValue, 1)
	for _, q := range stats {
		for _, st := range idemtype.AllStates {
			ch <- prometheus.MustNewConstMetric(c.descJobs, prometheus.GaugeValue, float64(q.Counts[st]), q.Queue, string(st))
		}
		age := 0.0
		if q.OldestAvailable != nil {
			age = max(0, now.Sub(*q.OldestAvailable).Seconds())
		}
		ch <- prometheus.MustNewConstMetric(c.descOldest, prometheus.GaugeValue, age, q.Queue)
	}
	ch <- prometheus.MustNewConstMetric(c.descRecords, prometheus.GaugeValue, float64(rs.Entries))
	ch <- prometheus.MustNewConstMetric(c.descRecordBytes, prometheus.GaugeValue, float64(rs.SizeBytes))
	if limits, err := c.s.store.LimitList(ctx, &store.LimitListParams{Now: now}); err == nil {
		c.collectLimits(ch, limits)
	}
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
