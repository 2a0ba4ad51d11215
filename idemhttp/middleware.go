package idemhttp

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/recordlease"
	"github.com/idem-dev/idem/store"
)

// Defaults of MiddlewareConfig.
const (
	// DefaultRecordTTL is how long a stored response is replayed.
	DefaultRecordTTL = 24 * time.Hour
	// DefaultRecordLease is how long an in-flight request holds its key
	// without renewal; it is renewed every third of it while the handler
	// runs, so only a crashed server lets it lapse.
	DefaultRecordLease = 30 * time.Second
	// DefaultMaxResponseBytes: larger responses are not stored (the key is
	// released, as for a failure).
	DefaultMaxResponseBytes = 1 << 20
	// DefaultNamespace prefixes the middleware's keys within the records
	// of the middleware. It does not separate them from job or Do keys:
	// the middleware's records have a namespace of their own whatever the
	// prefix (see MiddlewareConfig.Namespace).
	DefaultNamespace = "http:"
)

// MiddlewareConfig configures Middleware; the zero value is valid.
type MiddlewareConfig struct {
	// Required makes a missing Idempotency-Key a 400 on the covered methods.
	Required bool
	// Methods the middleware covers; default POST and PATCH. Other methods
	// pass through untouched.
	Methods []string
	// Tenant scopes the records of a request; default: the tenant of an
	// authenticated idem API request, else "default". A request with a key
	// for which it returns "" is refused (400 problem, the handler does
	// not run): such requests would share one scope and replay each
	// other's answers. Return a tenant of your own (such as "default")
	// for requests that may share one.
	Tenant func(r *http.Request) string
	// TTL is how long a stored response is kept and replayed; default DefaultRecordTTL.
	TTL time.Duration
	// Lease is the in-flight lease of a key; default DefaultRecordLease.
	Lease time.Duration
	// Keep is the policy that decides which responses are stored and
	// replayed. Default: status < 500. A response it refuses, and a handler
	// that panics, release the key so the client may retry with it.
	Keep func(status int) bool
	// MaxBodyBytes caps the request body read for the fingerprint (413
	// above); default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxResponseBytes: larger responses are not stored; default DefaultMaxResponseBytes.
	MaxResponseBytes int
	// Namespace prefixes the Idempotency-Key within the middleware's own
	// record namespace, so that two middlewares on one store and tenant
	// keep apart; default DefaultNamespace. Job keys, Do keys and the
	// middleware's keys never meet, whatever the Namespace or key.
	Namespace string
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Logger receives store errors; default slog.Default().
	Logger *slog.Logger
}

func (c MiddlewareConfig) withDefaults() MiddlewareConfig {
	if len(c.Methods) == 0 {
		c.Methods = []string{http.MethodPost, http.MethodPatch}
	}
	if c.Tenant == nil {
		c.Tenant = func(r *http.Request) string {
			if t := TenantFromContext(r.Context()); t != "" {
				return t
			}
			return idem.DefaultTenant
		}
	}
	if c.TTL <= 0 {
		c.TTL = DefaultRecordTTL
	}
	if c.Lease < time.Second {
		c.Lease = DefaultRecordLease
	}
	if c.Keep == nil {
		c.Keep = func(status int) bool { return status < 500 }
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxResponseBytes <= 0 {
		c.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// storedResponse is the envelope kept in the idempotency record. The
// body is kept as bytes (base64 in JSON), and so are the header fields
// that are not valid UTF-8, so that a replay sends the answer byte for
// byte.
type storedResponse struct {
	Fingerprint string      `json:"fingerprint"`
	Status      int         `json:"status"`
	Header      http.Header `json:"header"`
	// RawHeader holds the header fields whose name or a value is not
	// valid UTF-8 (obs-text, such as a Latin-1 file name): a JSON string
	// would hold U+FFFD instead of those bytes.
	RawHeader []rawHeaderField `json:"raw_header,omitempty"`
	Body      []byte           `json:"body"`
}

// rawHeaderField is a header field kept as bytes.
type rawHeaderField struct {
	Name   []byte   `json:"name"`
	Values [][]byte `json:"values"`
}

// splitHeader returns h without the fields that are not valid UTF-8, and
// those fields as bytes.
func splitHeader(h http.Header) (http.Header, []rawHeaderField) {
	var raw []rawHeaderField
	for k, vv := range h {
		valid := utf8.ValidString(k)
		for _, v := range vv {
			valid = valid && utf8.ValidString(v)
		}
		if valid {
			continue
		}
		f := rawHeaderField{Name: []byte(k)}
		for _, v := range vv {
			f.Values = append(f.Values, []byte(v))
		}
		raw = append(raw, f)
		delete(h, k)
	}
	return h, raw
}

// Middleware returns the IETF Idempotency-Key semantics for any net/http
// handler, on the records of st:
//   - the first request with a key runs and its response (status, the
//     headers the handler set, body) is stored when cfg.Keep allows
//     (default: status < 500); headers set outside the middleware (a
//     request id, CORS) are the replaying request's own;
//   - a repeat gets the stored response again, with Idempotent-Replayed: true;
//   - a repeat while the first is still running gets 409 (Retry-After: 1);
//   - the key with another request (fingerprint: SHA-256 of method, path as
//     sent with its query, and body, byte for byte: headers are not part of
//     it) gets 422;
//   - a request with a key that cfg.Tenant gives no tenant ("") gets 400;
//   - a missing key gets 400 when cfg.Required; a malformed key (not 1–255
//     printable ASCII) always 400; a key sent in double quotes is an RFC
//     8941 sf-string ("a\"b" is the key a"b; a malformed one is a 400);
//   - a response the policy refuses (default: 5xx), a panic, a final 1xx
//     (101) or a hijacked connection releases the key: a retry with it runs
//     the handler again;
//   - the writer is an http.Flusher (a flush before any write sends and
//     stores the 200 with the headers set so far) and an http.Hijacker;
//     trailers the handler sets are stored and replayed.
//
// Records are scoped by cfg.Tenant and expire after cfg.TTL. Once the
// handler has returned, storing its answer and releasing the key are each
// bounded by a third of cfg.Lease, so that a store that does not answer
// holds the request's goroutine no longer than that (the failure is
// logged; a key not given back is taken again once its lease ends). A
// store call that fails or answers after its bound may still have
// committed: the record is then read back (when the store has RecordGet,
// as every store.Records does), and an answer stored, or a key given back,
// is no failure to log.
func Middleware(st MiddlewareRecords, cfg *MiddlewareConfig) func(http.Handler) http.Handler {
	var c MiddlewareConfig
	if cfg != nil {
		c = *cfg
	}
	m := &middleware{st: st, cfg: c.withDefaults()}
	return m.wrap
}

type middleware struct {
	st  MiddlewareRecords
	cfg MiddlewareConfig
}

func (m *middleware) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !slices.Contains(m.cfg.Methods, r.Method) {
			next.ServeHTTP(w, r)
			return
		}
		key, err := idempotencyKey(r)
		if err != nil {
			writeProblem(w, problemFor(err))
			return
		}
		if key == "" {
			if m.cfg.Required {
				writeProblem(w, newProblem(http.StatusBadRequest, ProblemKeyMissing, "Idempotency-Key missing",
					"this request requires an Idempotency-Key header"))
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		m.serve(w, r, next, key)
	})
}

// idempotencyKey returns the validated header key ("" when absent). A
// value that starts with a double quote is a Structured Field string
// (RFC 8941 sf-string, the form draft-ietf-httpapi-idempotency-key-header
// gives the header): "a\"b" is the key a"b, and a malformed one is a 400.
// Any other value is the key as sent (most clients send a bare UUID).
func idempotencyKey(r *http.Request) (string, error) {
	vals := r.Header[headerIdempotencyKey] // Values without canonicalizing the name
	if len(vals) == 0 {
		return "", nil
	}
	if len(vals) > 1 {
		return "", invalid(headerIdempotencyKey, "send one Idempotency-Key header")
	}
	k := vals[0]
	if strings.HasPrefix(k, `"`) {
		var err error
		if k, err = parseSFString(k); err != nil {
			return "", err
		}
	}
	if err := idem.ValidateKey(headerIdempotencyKey, k); err != nil {
		return "", err
	}
	return k, nil
}

// parseSFString reads s, which starts with a double quote, as one RFC 8941
// sf-string (section 4.2.5) with nothing after it: printable ASCII up to
// the closing quote, \" and \\ its only escapes. The draft gives the
// header no parameters, so none are taken. A refusal says why such a value
// is read so and how to send a key that starts with '"' (sfStringHint): a
// client written before this reading sends such a key bare.
func parseSFString(s string) (string, error) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			i++
			if i == len(s) || (s[i] != '"' && s[i] != '\\') {
				return "", sfStringInvalid(`a quoted key escapes only '"' and '\' (as \" and \\)`)
			}
			b.WriteByte(s[i])
		case c == '"':
			if i != len(s)-1 {
				return "", sfStringInvalid("a quoted key must end at its closing quote (no parameters)")
			}
			return b.String(), nil
		case c < 0x20 || c > 0x7e:
			return "", invalid(headerIdempotencyKey, "must be printable ASCII (0x20-0x7E)")
		default:
			b.WriteByte(c)
		}
	}
	return "", sfStringInvalid("a quoted key needs its closing quote")
}

// sfStringHint follows the refusal of a malformed sf-string key.
const sfStringHint = `; a value that starts with '"' is read as an RFC 8941 sf-string, ` +
	`so a key that itself starts with '"' is sent quoted, its '"' and '\' escaped ` +
	`(the key "order-1 as "\"order-1"), as current idem clients do`

// sfStringInvalid is the 400 problem of a malformed sf-string key.
func sfStringInvalid(reason string) error {
	return invalid(headerIdempotencyKey, reason+sfStringHint)
}

func (m *middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler, key string) {
	body, err := io.ReadAll(io.LimitReader(r.Body, m.cfg.MaxBodyBytes+1))
	if err != nil {
		writeProblem(w, problemFor(err))
		return
	}
	if int64(len(body)) > m.cfg.MaxBodyBytes {
		writeProblem(w, problemFor(&http.MaxBytesError{Limit: m.cfg.MaxBodyBytes}))
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	tenant := m.cfg.Tenant(r)
	if tenant == "" {
		// No scope: every such request would share one, and replay the
		// answers of others with the same key.
		writeProblem(w, newProblem(http.StatusBadRequest, ProblemInvalid, "Invalid request",
			"the request has no tenant to scope its Idempotency-Key (the middleware's Tenant gave none)"))
		return
	}
	fp := requestFingerprint(r, body)
	p := &recordlease.Params{Tenant: tenant, Purpose: recordlease.PurposeHTTP, Key: m.cfg.Namespace + key,
		Owner: fp[:16] + "." + store.NewToken(), Lease: m.cfg.Lease, TTL: m.cfg.TTL, Now: m.cfg.Now}
	lease, rec, err := recordlease.Acquire(r.Context(), m.st, p)
	if err != nil {
		writeError(w, r, m.cfg.Logger, store.Classify(m.st, fmt.Errorf("idempotency key: %w", err)))
		return
	}
	if lease == nil {
		m.answerHeld(w, rec, fp)
		return
	}
	m.run(w, r, next, lease, fp)
}

// requestFingerprint is the hex SHA-256 of method, target (the path as
// sent, escaped, and the query when there is one) and body. A target
// without a query or escapes hashes as the decoded path did, so the
// records stored before the query counted still match their retries.
func requestFingerprint(r *http.Request, body []byte) string {
	h := sha256.New()
	h.Write([]byte(r.Method))
	h.Write([]byte{0})
	h.Write([]byte(r.URL.EscapedPath()))
	if r.URL.RawQuery != "" {
		h.Write([]byte("?" + r.URL.RawQuery))
	}
	h.Write([]byte{0})
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// answerHeld answers a request whose key is held or completed.
func (m *middleware) answerHeld(w http.ResponseWriter, rec *idemtype.Record, fp string) {
	reused := newProblem(http.StatusUnprocessableEntity, ProblemKeyReused, "Idempotency key reused",
		"the Idempotency-Key was used with a different request")
	if rec.Status == idemtype.RecordCompleted {
		var sr storedResponse
		if err := json.Unmarshal(rec.Result, &sr); err != nil || sr.Fingerprint != fp {
			writeProblem(w, reused)
			return
		}
		h := w.Header()
		for k, v := range sr.Header {
			h[k] = slices.Clone(v)
		}
		for _, f := range sr.RawHeader {
			vv := make([]string, 0, len(f.Values))
			for _, v := range f.Values {
				vv = append(vv, string(v))
			}
			h[string(f.Name)] = vv
		}
		h.Set(headerIdempotentReplayed, "true")
		w.WriteHeader(sr.Status)
		_, _ = w.Write(sr.Body)
		return
	}
	if holder, _, ok := strings.Cut(rec.LeaseOwner, "."); ok && holder != fp[:16] {
		writeProblem(w, reused)
		return
	}
	w.Header().Set("Retry-After", "1")
	writeProblem(w, newProblem(http.StatusConflict, ProblemKeyInProgress, "Idempotency key in progress",
		"a request with this Idempotency-Key is still being processed"))
}

// run serves the request holding the key, then stores or releases it.
// Once the handler has returned, the renewer is stopped (cancelled, not
// waited for in a renewal the store does not answer) and the storing of
// the answer and the release of the key are each bounded (storeBound):
// the answer has been written, and a store that does not answer must not
// hold the request's goroutine for ever.
func (m *middleware) run(w http.ResponseWriter, r *http.Request, next http.Handler, lease *recordlease.Lease, fp string) {
	bg := context.WithoutCancel(r.Context())
	holdCtx, cancelHold := context.WithCancel(bg)
	defer cancelHold()
	stopRenewer := lease.Hold(holdCtx, func(err error) {
		if holdCtx.Err() == nil { // not the renewal the handler's end cut short
			m.cfg.Logger.Warn("idempotency key: renew", "key", lease.StoredKey(), "err", err)
		}
	})
	stop := func() { cancelHold(); stopRenewer() }
	// Headers already set belong to the layers outside the middleware
	// (request id, CORS): they describe this request, not the answer, so
	// only what the handler sets or changes is stored and replayed.
	cw := &captureWriter{ResponseWriter: w, max: m.cfg.MaxResponseBytes, outer: w.Header().Clone()}
	var unstored bool
	r = r.WithContext(context.WithValue(r.Context(), notStoredKey{}, &unstored))
	settled := false // the answer stored, or the key given back
	defer func() {
		stop()
		if settled {
			return
		}
		release := lease.Release
		if unstored {
			release = lease.Forget
		}
		_ = m.release(bg, lease, release)
	}()
	next.ServeHTTP(cw, r)
	if cw.hijacked {
		// The handler answered on the connection itself: there is no
		// answer to store, and the key is released.
		return
	}
	if cw.status == 0 {
		// No WriteHeader nor Write: net/http answers 200 with the headers
		// set; capture them as it sends them.
		cw.WriteHeader(http.StatusOK)
	}
	if cw.status < 200 || !m.cfg.Keep(cw.status) || cw.overflow || unstored {
		// A final 1xx (101 Switching Protocols) is no answer to replay.
		return
	}
	cw.captureTrailers()
	header, raw := splitHeader(cw.header)
	env, err := json.Marshal(storedResponse{Fingerprint: fp, Status: cw.status, Header: header, RawHeader: raw, Body: cw.body.Bytes()})
	if err != nil {
		return
	}
	stop()
	settled = true
	m.keep(bg, lease, env)
}

// storeBound bounds each store call the middleware makes once the handler
// has returned (storing the answer, giving the key back, reading the
// record back): a third of the lease, as Client.Do bounds its calls by a
// third of Config.LeaseDuration. The lease then still has two thirds left.
func (m *middleware) storeBound() time.Duration { return m.cfg.Lease / 3 }

// keep stores the answer env on the key's record within storeBound. When
// the store fails or does not answer in time, the completion may still
// have committed (a store that answers late, a connection lost after the
// commit): the key is given back first — a completion that committed holds
// no lease, so the release changes nothing; one that did not can no longer
// commit, its owner gone — and the record is then read back, as Client.Do
// does: when it holds this answer (its hash, stored at the time it was
// stored) the answer is stored and nothing is logged above Info. Otherwise
// the failure is logged (Error): the key was released, or stays held until
// its lease ends (the release's own failure is logged too).
func (m *middleware) keep(ctx context.Context, lease *recordlease.Lease, env []byte) {
	sum := sha256.Sum256(env)
	hash := hex.EncodeToString(sum[:])
	// The time stored (microseconds, the stores' precision), compared with
	// the record read back.
	at := m.cfg.Now().UTC().Truncate(time.Microsecond)
	cctx, cancel := context.WithTimeout(ctx, m.storeBound())
	err := lease.Complete(cctx, &recordlease.Result{Bytes: env, Hash: hash, At: at})
	cancel()
	if err == nil {
		return
	}
	read := m.release(ctx, lease, lease.Release)
	if read == nil {
		read = m.readBack(ctx, lease)
	}
	if rec := read.rec; read.err == nil && rec.Status == idemtype.RecordCompleted && rec.ResultHash == hash &&
		rec.CompletedAt != nil && rec.CompletedAt.Equal(at) {
		m.cfg.Logger.Info("idempotency key: response stored although the store's answer failed; read back",
			"key", lease.StoredKey(), "tenant", lease.Tenant(), "err", err)
		return
	}
	m.cfg.Logger.Error("idempotency key: store response", "key", lease.StoredKey(), "tenant", lease.Tenant(), "err", err)
}

// release gives the key back (release is lease.Release or lease.Forget)
// within storeBound. When the release fails (the store did not answer in
// time, the connection was lost), it may still have committed: the
// record is read back (bounded too), and a key no longer held by the lease
// was given back — nothing above Debug is logged. Otherwise the failure is
// logged (Error: the key stays held until its lease ends). It returns the
// record read back (nil when the release succeeded and nothing was read).
func (m *middleware) release(ctx context.Context, lease *recordlease.Lease, release func(context.Context) error) *recordRead {
	rctx, cancel := context.WithTimeout(ctx, m.storeBound())
	err := release(rctx)
	cancel()
	if err == nil {
		return nil
	}
	read := m.readBack(ctx, lease)
	if read.err == nil && read.rec.LeaseOwner != lease.Owner() || errors.Is(read.err, idemtype.ErrNotFound) {
		m.cfg.Logger.Debug("idempotency key given back although the store's answer failed; read back",
			"key", lease.StoredKey(), "tenant", lease.Tenant(), "err", err)
		return read
	}
	m.cfg.Logger.Error("idempotency key: release; it stays held until its lease ends",
		"key", lease.StoredKey(), "tenant", lease.Tenant(), "lease_until", lease.Until(), "err", err)
	return read
}

// recordGetter is the record read of a store (every store.Records has
// it; MiddlewareRecords does not require it): the middleware reads a
// record back with it after a write whose answer failed.
type recordGetter interface {
	RecordGet(ctx context.Context, p *store.RecordGetParams) (*idemtype.Record, error)
}

// errNoReadBack is the read back of a store without RecordGet.
var errNoReadBack = errors.New("the store cannot read a record back")

// recordRead is the outcome of reading a leased key's record back.
type recordRead struct {
	rec *idemtype.Record
	err error
}

// readBack reads the record of lease's key within storeBound.
func (m *middleware) readBack(ctx context.Context, lease *recordlease.Lease) *recordRead {
	g, ok := m.st.(recordGetter)
	if !ok {
		return &recordRead{err: errNoReadBack}
	}
	rctx, cancel := context.WithTimeout(ctx, m.storeBound())
	defer cancel()
	rec, err := g.RecordGet(rctx, &store.RecordGetParams{Tenant: lease.Tenant(), Key: lease.StoredKey(), Now: m.cfg.Now()})
	if err == nil && rec == nil {
		err = idemtype.ErrNotFound
	}
	if err != nil {
		err = fmt.Errorf("read back key %q: %w", lease.StoredKey(), err)
	}
	return &recordRead{rec: rec, err: err}
}

// notStoredKey is the context key of the flag notStored sets.
type notStoredKey struct{}

// notStored tells the idempotency middleware serving r, if any, not to
// store the answer the handler is writing: the key is released and a
// repeat of the request runs again. For answers whose replay would give
// nothing a new run would not, such as an empty claim (an idle pull
// worker's every poll would otherwise leave a record for a day). It is
// called from the handler's own goroutine, before it returns.
func notStored(r *http.Request) {
	if p, ok := r.Context().Value(notStoredKey{}).(*bool); ok {
		*p = true
	}
}

// captureWriter passes a response through and keeps a copy of it.
type captureWriter struct {
	http.ResponseWriter
	status int
	header http.Header
	// outer holds the headers set before the handler ran; those it left
	// unchanged are not stored.
	outer    http.Header
	body     bytes.Buffer
	max      int
	overflow bool
	hijacked bool
}

// WriteHeader implements http.ResponseWriter.
func (c *captureWriter) WriteHeader(status int) {
	if c.status != 0 {
		return
	}
	if status >= 100 && status < 200 && status != http.StatusSwitchingProtocols {
		// Informational (103 Early Hints): passed on, not the answer.
		c.ResponseWriter.WriteHeader(status)
		return
	}
	c.status = status
	c.header = make(http.Header)
	for k, v := range c.ResponseWriter.Header() {
		switch k {
		case "Date", "Content-Length", "Transfer-Encoding", "Connection":
			continue
		}
		if o, ok := c.outer[k]; ok && slices.Equal(o, v) {
			continue
		}
		c.header[k] = slices.Clone(v)
	}
	c.ResponseWriter.WriteHeader(status)
}

// Write implements http.ResponseWriter.
func (c *captureWriter) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.WriteHeader(http.StatusOK)
	}
	if !c.overflow {
		if c.body.Len()+len(b) > c.max {
			c.overflow = true
			c.body.Reset()
		} else {
			c.body.Write(b)
		}
	}
	return c.ResponseWriter.Write(b)
}

// Flush implements http.Flusher for streaming handlers (the type
// assertion as well as http.ResponseController).
func (c *captureWriter) Flush() { _ = c.FlushError() }

// FlushError flushes the underlying writer; a flush before any write sends
// the 200 with the headers set so far, and so is it captured.
func (c *captureWriter) FlushError() error {
	if c.status == 0 {
		c.WriteHeader(http.StatusOK)
	}
	return http.NewResponseController(c.ResponseWriter).Flush()
}

// Hijack implements http.Hijacker; a hijacked request stores no answer.
func (c *captureWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, buf, err := http.NewResponseController(c.ResponseWriter).Hijack()
	if err == nil {
		c.hijacked = true
	}
	return conn, buf, err
}

// captureTrailers adds the trailers the handler set once it returned (the
// values of the keys its Trailer header declared, and the keys prefixed
// with http.TrailerPrefix) to the stored headers, under
// http.TrailerPrefix, so that the replay sends them as trailers.
func (c *captureWriter) captureTrailers() {
	h := c.ResponseWriter.Header()
	for _, v := range c.header["Trailer"] {
		for _, k := range strings.Split(v, ",") {
			k = http.CanonicalHeaderKey(strings.TrimSpace(k))
			if vv, ok := h[k]; ok && k != "" {
				c.header[http.TrailerPrefix+k] = slices.Clone(vv)
			}
		}
	}
	for k, vv := range h {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			c.header[k] = slices.Clone(vv)
		}
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (c *captureWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }
