// Package idemhttp is the HTTP API v1 of idem (see API.md and
// /v1/openapi.json): jobs, batches, the dead-letter queue, pull workers,
// idempotency records, stats, health, readiness and Prometheus metrics,
// with API-key authentication per tenant and errors as
// application/problem+json. It also offers Middleware, the Idempotency-Key
// semantics for any net/http handler.
package idemhttp

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/internal/testsignal"
	"github.com/idem-dev/idem/store"
)

// Server serves the HTTP API. It is an http.Handler for every route;
// APIHandler and OpsHandler split the API from the ops endpoints when they
// listen on different addresses.
type Server struct {
	client Client
	store  Store
	cfg    *Config

	auth         *authenticator
	idemMW       func(http.Handler) http.Handler
	leaseMW      func(http.Handler) http.Handler // idemMW that keeps no 409
	claimMW      func(http.Handler) http.Handler // idemMW that stores any claim reply
	jobMW        func(http.Handler) http.Handler // idemMW that stores any one-job reply
	reg          *prometheus.Registry
	metrics      *httpMetrics
	storeMetrics *storeCollector

	all, api, ops http.Handler
	routes        []route

	draining context.Context // ended by Drain
	drain    context.CancelFunc
	// writes remembers the outcome of the latest API writes for /readyz.
	writes writeTracker
	// claimWaiting announces a long-polling claim to tests.
	claimWaiting testsignal.Signal[struct{}]
}

// route is one registered endpoint.
type route struct {
	method, path string
	ops          bool // no key; served by OpsHandler
	// anyQuery: the query is not checked (probes, scrapes and the document,
	// whose callers may add cache-busting or tool parameters).
	anyQuery   bool
	public     bool // an API route served without a key
	idempotent bool // wrapped in the Idempotency-Key middleware
	// lease: wrapped in the Idempotency-Key middleware that stores no 409
	// (a result lease held by another holder is not an answer to replay:
	// the client retries it until the holder is done).
	lease bool
	// claim: idempotent, storing replies up to maxClaimReplyBytes;
	// job: idempotent, its reply one job, stored up to maxJobReplyBytes.
	claim, job bool
	// query lists the query parameters the route takes; any other is a
	// 400 naming it (checkQuery), as an unknown JSON field is.
	query   []string
	handler func(w http.ResponseWriter, r *http.Request) error
}

// jobListQuery are the query parameters of the job lists (GET /v1/jobs,
// GET /v1/dlq): listQuery reads them.
var jobListQuery = []string{"state", "queue", "kind", "partition_key", "idempotency_key", "since", "until",
	"finished_since", "error_code", "resolved", "limit", "cursor"}

// The Idempotency-Key middleware stores a reply up to a cap; the routes
// whose retry must not run twice (a claim, a one-job reply, a result-lease
// reply) have caps derived from the input limits, so that every reply they
// can give is stored. Replies are written without HTML escaping
// (encodeJSON), so a raw JSON value (args, metadata, a result: up to
// MaxArgsBytes each) is never longer in a reply than stored (encoding/json
// only compacts it), while a byte of free text (an error, a note) may
// become a six-byte \u escape (a control character); names and keys are
// printable ASCII of up to MaxKeyLength bytes (at most two bytes each in
// JSON). A last error is at most MaxErrorBytes whoever wrote it (a pull
// worker's longer fail text is refused, a Go handler's is stored cut:
// store.StorableError); one stored whole before that cut existed is cut
// the same way when read (store.ReadError, in both stores' row scans).
const (
	// maxEscapedByte is the most bytes JSON writes for one byte of text.
	maxEscapedByte = len(`\u0001`)
	// maxJobFieldsBytes bounds the fields of a job in a reply other than
	// its raw values, last error and resolution note: ids, names, keys,
	// times, up to MaxDependsOn dependencies and a retry policy of up to
	// retryspec.MaxDelays delays (about 6 KiB at most).
	maxJobFieldsBytes = 16 << 10
	// maxClaimJobBytes bounds one job of a claim reply: args and metadata,
	// a last error and its other fields (a claimed job has no result and
	// no resolution note).
	maxClaimJobBytes = 2*idem.MaxArgsBytes + maxEscapedByte*idem.MaxErrorBytes + maxJobFieldsBytes
	// maxClaimReplyBytes bounds the reply of a claim: up to MaxClaimLimit
	// jobs. A claim reply the middleware did not store would let the retry
	// of a claim whose reply was lost take other jobs, leaving the first
	// ones leased to nobody until the rescuer takes them back, an attempt
	// lost each.
	maxClaimReplyBytes = idem.MaxClaimLimit * maxClaimJobBytes
	// maxJobReplyBytes bounds a reply of one job: args, metadata and
	// result, a last error, a resolution note and its other fields. The
	// routes that answer one job (complete, fail, cancel, retry, resolve,
	// trigger) store replies up to it: a retry (same key) of one whose
	// reply was not stored ran again and answered 409 for a call that had
	// worked.
	maxJobReplyBytes = 3*idem.MaxArgsBytes + maxEscapedByte*(idem.MaxErrorBytes+idem.MaxResolutionNote) + maxJobFieldsBytes
	// maxLeaseReplyBytes bounds the reply of a result-lease complete: the
	// result (refused over MaxArgsBytes whatever the body limit), the key
	// and the other fields. A complete whose reply was not stored answered
	// its retry (the same key, after a lost reply) 409 lease lost, for a
	// result that was stored. (An acquire answering a result stored by a
	// Go Do, which has no size limit, may exceed it; its retry answers the
	// cached result again.)
	maxLeaseReplyBytes = idem.MaxArgsBytes + maxJobFieldsBytes
)

// NewServer returns the API server of client on st (the store the client
// uses; its API keys and records serve auth and the middleware). When st
// keeps counters (store.Counters: both stores do), the cache hits and
// misses of /v1/stats, /v1/idempotency and the cache_hit_rate check are
// the store's, shared by every node: give the client (and every other
// node's) a CacheCounters in its idem.Config.Observer, as `idem serve`
// does, or they stay 0.
func NewServer(client Client, st Store, cfg *Config) (*Server, error) {
	if client == nil || st == nil {
		return nil, errors.New("idemhttp: nil client or store")
	}
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Server{client: client, store: st, cfg: c, reg: prometheus.NewRegistry()}
	s.draining, s.drain = context.WithCancel(context.Background())
	s.auth = &authenticator{keys: st, ttl: c.AuthCacheTTL, now: c.Now, cache: map[string]authEntry{}}
	mwc := c.Idempotency
	mwc.Tenant = tenantOf
	keep := mwc.Keep
	if keep == nil {
		keep = func(status int) bool { return status < 500 }
	}
	// A 401 answers the key (revoked during a long poll), not the request:
	// the request retried with another key runs. A 400, 413 or 415 refuses
	// the request as sent before anything ran (bad input changes nothing):
	// not stored either, so the corrected request with the same
	// Idempotency-Key runs rather than getting a 422 for another request.
	kept := func(status int) bool {
		switch status {
		case http.StatusUnauthorized, http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
			return false
		}
		return keep(status)
	}
	mwc.Keep = kept
	s.idemMW = Middleware(st, &mwc)
	lmw := mwc
	lmw.Keep = func(status int) bool { return status != http.StatusConflict && kept(status) }
	lmw.MaxResponseBytes = max(lmw.MaxResponseBytes, DefaultMaxResponseBytes, maxLeaseReplyBytes)
	s.leaseMW = Middleware(st, &lmw)
	cmw := mwc
	cmw.MaxResponseBytes = max(cmw.MaxResponseBytes, DefaultMaxResponseBytes, maxClaimReplyBytes)
	s.claimMW = Middleware(st, &cmw)
	jmw := mwc
	jmw.MaxResponseBytes = max(jmw.MaxResponseBytes, DefaultMaxResponseBytes, maxJobReplyBytes)
	s.jobMW = Middleware(st, &jmw)
	s.metrics = newHTTPMetrics(s.reg, s)
	s.routes = s.routeTable()
	s.all = s.outer(s.mux(true, true))
	s.api = s.outer(s.mux(true, false))
	s.ops = s.outer(s.mux(false, true))
	return s, nil
}

// routeTable lists every endpoint; /v1/openapi.json documents exactly these.
func (s *Server) routeTable() []route {
	return []route{
		{method: "POST", path: "/v1/jobs", handler: s.enqueue},
		{method: "POST", path: "/v1/jobs/batch", handler: s.enqueueBatch},
		{method: "GET", path: "/v1/jobs", query: jobListQuery, handler: s.listJobs},
		{method: "GET", path: "/v1/jobs/{id}", handler: s.getJob},
		{method: "POST", path: "/v1/jobs/{id}/cancel", job: true, handler: s.cancelJob},
		{method: "POST", path: "/v1/jobs/{id}/retry", job: true, handler: s.retryJob},
		{method: "GET", path: "/v1/jobs/{id}/attempts", handler: s.attempts},
		{method: "POST", path: "/v1/jobs/replay", idempotent: true, handler: s.replay},
		{method: "GET", path: "/v1/dlq", query: jobListQuery, handler: s.listDLQ},
		{method: "POST", path: "/v1/dlq/requeue", idempotent: true, handler: s.requeue},
		{method: "DELETE", path: "/v1/dlq/{id}", handler: s.deleteDead},
		{method: "POST", path: "/v1/dlq/{id}/resolve", job: true, handler: s.resolveDead},
		{method: "POST", path: "/v1/batches", handler: s.createBatch},
		{method: "GET", path: "/v1/batches/{id}", handler: s.getBatch},
		{method: "POST", path: "/v1/batches/{id}/cancel", idempotent: true, handler: s.cancelBatch},
		{method: "POST", path: "/v1/claim", claim: true, handler: s.claim},
		{method: "POST", path: "/v1/jobs/{id}/heartbeat", handler: s.heartbeat},
		{method: "POST", path: "/v1/jobs/{id}/complete", job: true, handler: s.complete},
		{method: "POST", path: "/v1/jobs/{id}/fail", job: true, handler: s.fail},
		{method: "GET", path: "/v1/idempotency", handler: s.recordStats},
		{method: "GET", path: "/v1/idempotency/{key}", query: []string{"include"}, handler: s.getRecord},
		{method: "DELETE", path: "/v1/idempotency/{key}", handler: s.deleteRecord},
		{method: "POST", path: "/v1/idempotency/{key}/lease", lease: true, handler: leaseRoute(s, true, s.leaseAcquire)},
		{method: "POST", path: "/v1/idempotency/{key}/lease/renew", lease: true, handler: leaseRoute(s, false, s.leaseRenew)},
		{method: "POST", path: "/v1/idempotency/{key}/lease/complete", lease: true, handler: leaseRoute(s, false, s.leaseComplete)},
		{method: "POST", path: "/v1/idempotency/{key}/lease/release", lease: true, handler: leaseRoute(s, false, s.leaseRelease)},
		{method: "GET", path: "/v1/schedules", handler: s.listSchedules},
		{method: "GET", path: "/v1/schedules/{name}", handler: s.getSchedule},
		{method: "PUT", path: "/v1/schedules/{name}", handler: s.putSchedule},
		{method: "DELETE", path: "/v1/schedules/{name}", handler: s.deleteSchedule},
		{method: "POST", path: "/v1/schedules/{name}/trigger", job: true, handler: s.triggerSchedule},
		{method: "GET", path: "/v1/stats", query: []string{"all_tenants"}, handler: s.stats},
		{method: "GET", path: "/v1/health", handler: s.getHealth},
		{method: "GET", path: "/v1/targets", handler: s.listTargets},
		{method: "GET", path: "/v1/targets/{name}", handler: s.getTarget},
		{method: "PUT", path: "/v1/targets/{name}", handler: s.putTarget},
		{method: "DELETE", path: "/v1/targets/{name}", handler: s.deleteTarget},
		{method: "POST", path: "/v1/topics/{topic}/events", handler: s.publish},
		{method: "GET", path: "/v1/topics/{topic}/events", query: []string{"partition_key", "type", "limit", "cursor"}, handler: s.listEvents},
		{method: "POST", path: "/v1/topics/{topic}/replay", idempotent: true, handler: s.replayEvents},
		{method: "GET", path: "/v1/topics/{topic}/subscriptions", handler: s.listSubscriptions},
		{method: "GET", path: "/v1/topics/{topic}/subscriptions/{name}", handler: s.getSubscription},
		{method: "PUT", path: "/v1/topics/{topic}/subscriptions/{name}", handler: s.putSubscription},
		{method: "DELETE", path: "/v1/topics/{topic}/subscriptions/{name}", handler: s.deleteSubscription},
		{method: "GET", path: "/v1/limits", handler: s.listLimits},
		{method: "PUT", path: "/v1/limits/{scope}/{name}", query: []string{"queue"}, handler: s.putLimit},
		{method: "GET", path: "/v1/limits/{scope}/{name}", query: []string{"queue"}, handler: s.getLimit},
		{method: "DELETE", path: "/v1/limits/{scope}/{name}", query: []string{"queue"}, handler: s.deleteLimit},
		{method: "DELETE", path: "/v1/apikeys/{id}", handler: s.revokeAPIKey},
		{method: "POST", path: "/v1/queues/{queue}/pause", idempotent: true, handler: s.pauseQueue},
		{method: "POST", path: "/v1/queues/{queue}/resume", idempotent: true, handler: s.resumeQueue},
		{method: "GET", path: "/v1/openapi.json", public: true, anyQuery: true, handler: s.openAPI},
		{method: "GET", path: "/healthz", ops: true, anyQuery: true, handler: s.healthz},
		{method: "GET", path: "/readyz", ops: true, anyQuery: true, handler: s.readyz},
		{method: "GET", path: "/metrics", ops: true, anyQuery: true, handler: s.metricsHandler},
	}
}

// mux builds a handler with the API routes, the ops routes, or both.
func (s *Server) mux(api, ops bool) http.Handler {
	mux := http.NewServeMux()
	for _, rt := range s.routes {
		if (rt.ops && !ops) || (!rt.ops && !api) {
			continue
		}
		var h http.Handler = s.adapt(rt.query, !rt.anyQuery, rt.handler)
		switch {
		case rt.claim:
			h = s.claimMW(h)
		case rt.job:
			h = s.jobMW(h)
		case rt.idempotent:
			h = s.idemMW(h)
		case rt.lease:
			h = s.leaseMW(h)
		}
		if !rt.ops && !rt.public {
			h = s.auth.wrap(s, h)
		}
		mux.Handle(rt.method+" "+rt.path, s.metrics.instrument(rt.method+" "+rt.path, h))
	}
	return problemMux{mux}
}

// adapt turns an error-returning handler into an http.Handler that, when
// strict, refuses before h runs a query it cannot read or a query
// parameter other than those of query.
func (s *Server) adapt(query []string, strict bool, h func(w http.ResponseWriter, r *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strict {
			if err := checkQuery(r, query); err != nil {
				writeError(w, r, s.cfg.Logger, store.Classify(s.store, err))
				return
			}
		}
		err := store.Classify(s.store, h(w, r))
		s.writes.note(r.Method, err, s.now())
		if err != nil {
			writeError(w, r, s.cfg.Logger, err)
		}
	})
}

// ServeHTTP implements http.Handler: every route, API and ops.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.all.ServeHTTP(w, r) }

// APIHandler serves the API routes only (ops routes answer 404).
func (s *Server) APIHandler() http.Handler { return s.api }

// OpsHandler serves /healthz, /readyz and /metrics only.
func (s *Server) OpsHandler() http.Handler { return s.ops }

// Registry returns the server's Prometheus registry, for extra collectors.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// Routes lists the registered "METHOD /path" patterns.
func (s *Server) Routes() []string {
	out := make([]string, len(s.routes))
	for i, rt := range s.routes {
		out[i] = rt.method + " " + rt.path
	}
	return out
}

func (s *Server) now() time.Time { return s.cfg.Now().UTC() }

// headerValue is h.Get(name) for a name in canonical form (every one the
// server passes: TestHeaderNamesCanonical), without canonicalizing it
// again on each request (about 400 instructions a lookup).
func headerValue(h http.Header, name string) string {
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// setHeader is h.Set(name, value) for a name in canonical form.
func setHeader(h http.Header, name, value string) { h[name] = []string{value} }

// problemMux turns the mux's own plain-text 404 and 405 into problems.
type problemMux struct{ mux *http.ServeMux }

func (p problemMux) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Replies carry JSON with <, > and & as they are (not HTML-escaped):
	// no browser may take one for HTML.
	setHeader(w.Header(), "X-Content-Type-Options", "nosniff")
	if r.Method != http.MethodConnect && strings.HasPrefix(r.URL.Path, "/v1/") && !cleanSegments(r.URL.EscapedPath()) {
		// The mux would redirect (307, an HTML body) to the cleaned path,
		// another operation (POST …/lease/renew/.. is the acquire), or
		// answer "no such endpoint" for a name left out (PUT /v1/targets/).
		if p.routesLiterally(r) {
			writeProblem(w, invalid("path", `a path segment must not be empty, "." or ".." (escape a name "." as %2E)`))
		} else {
			writeProblem(w, newProblem(http.StatusNotFound, ProblemNotFound, "Not found", "no such endpoint"))
		}
		return
	}
	if _, pattern := p.mux.Handler(r); pattern == "" {
		pw := &plainErrorWriter{ResponseWriter: w}
		p.mux.ServeHTTP(pw, r)
		return
	}
	p.mux.ServeHTTP(w, r)
}

// routesLiterally reports whether r's path names an endpoint when its
// empty, "." and ".." segments are taken as names.
func (p problemMux) routesLiterally(r *http.Request) bool {
	segs := strings.Split(r.URL.EscapedPath(), "/")
	for i, seg := range segs[1:] {
		if seg == "" || seg == "." || seg == ".." {
			segs[i+1] = "x"
		}
	}
	u := *r.URL
	u.RawPath = ""
	u.Path = strings.Join(segs, "/")
	lit := r.Clone(r.Context())
	lit.URL = &u
	_, pattern := p.mux.Handler(lit)
	return pattern != ""
}

// cleanSegments reports whether the escaped path has no empty, "." or
// ".." segment (no trailing slash either): the paths the mux routes as
// they are, without redirecting them or answering 404 for a name left out.
func cleanSegments(escaped string) bool {
	// The segments after the first "/", as strings.Split(escaped,
	// "/")[1:] would give them, without allocating them.
	_, rest, ok := strings.Cut(escaped, "/")
	for ok {
		var seg string
		seg, rest, ok = strings.Cut(rest, "/")
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// plainErrorWriter replaces a text/plain error from the mux by a problem.
type plainErrorWriter struct {
	http.ResponseWriter
	replaced bool
}

func (w *plainErrorWriter) WriteHeader(status int) {
	if status == http.StatusMethodNotAllowed || status == http.StatusNotFound {
		if strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
			w.replaced = true
			if status == http.StatusNotFound {
				writeProblem(w.ResponseWriter, newProblem(status, ProblemNotFound, "Not found", "no such endpoint"))
			} else {
				writeProblem(w.ResponseWriter, newProblem(status, ProblemMethodNotAllowed, "Method not allowed",
					"the endpoint does not accept this method"))
			}
			return
		}
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *plainErrorWriter) Write(b []byte) (int, error) {
	if w.replaced {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}
