// Package idemclient is a Go client for the idem HTTP API v1 (see API.md
// and /v1/openapi.json).
//
// Every POST carries an Idempotency-Key (the caller's, or a random one the
// client makes), and the client retries network errors, 5xx, 429 and the
// 409 answers "key in progress" and "conflict" (a concurrent change; nothing
// was done) with the same key and body: a retried enqueue
// returns the job the first attempt created, a retried cancel replays the
// first answer. Errors from the server are *Error, and errors.Is maps them
// to the sentinels of package idemtype (idem.ErrNotFound, …).
package idemclient

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/idem-dev/idem/idemhttp/wire"
	"github.com/idem-dev/idem/idemtype"
)

// Defaults of Config.
const (
	DefaultMaxRetries = 4
	DefaultMinBackoff = 100 * time.Millisecond
	DefaultMaxBackoff = 5 * time.Second
)

// Config configures a Client; nil means every default.
type Config struct {
	// APIKey is sent as Authorization: Bearer.
	APIKey string
	// Tenant, when not "", is sent as Idem-Tenant (admin keys only).
	Tenant string
	// HTTPClient; default a client without a global timeout (long polls
	// are bounded by their wait and the caller's context).
	HTTPClient *http.Client
	// MaxRetries after the first attempt; default DefaultMaxRetries;
	// negative disables retries.
	MaxRetries int
	// MinBackoff and MaxBackoff bound the exponential backoff with jitter
	// between retries (a Retry-After header wins when longer, up to
	// MaxBackoff); a MaxBackoff below MinBackoff is MinBackoff.
	MinBackoff, MaxBackoff time.Duration
	// UserAgent; default "idemclient".
	UserAgent string
}

// Client calls one idem server. It is safe for concurrent use.
type Client struct {
	base *url.URL
	cfg  Config
	hc   *http.Client
}

// New returns a client for the server at baseURL (e.g. "http://127.0.0.1:8080").
func New(baseURL string, cfg *Config) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("idemclient: invalid base URL %q", baseURL)
	}
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.MaxRetries == 0 {
		c.MaxRetries = DefaultMaxRetries
	}
	if c.MaxRetries < 0 {
		c.MaxRetries = 0
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = DefaultMinBackoff
	}
	switch {
	case c.MaxBackoff <= 0:
		c.MaxBackoff = max(DefaultMaxBackoff, c.MinBackoff)
	case c.MaxBackoff < c.MinBackoff:
		// A cap below the floor: the floor (not the 5s default, which
		// would wait longer than the caller allowed).
		c.MaxBackoff = c.MinBackoff
	}
	if c.UserAgent == "" {
		c.UserAgent = "idemclient"
	}
	hc := c.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	return &Client{base: u, cfg: c, hc: hc}, nil
}

// gone reports whether GET path answers 404.
func (cl *Client) gone(ctx context.Context, path string) bool {
	_, err := cl.do(ctx, &call{method: http.MethodGet, path: path})
	return errors.Is(err, idemtype.ErrNotFound)
}

// Error is a problem (RFC 9457) answered by the server: a wire.Problem
// with the client's own Error and Is.
type Error wire.Problem

// Error implements error.
func (e *Error) Error() string {
	if e.Detail != "" {
		return fmt.Sprintf("idem: %d %s: %s", e.Status, e.Title, e.Detail)
	}
	return fmt.Sprintf("idem: %d %s", e.Status, e.Title)
}

// Is maps problems to the sentinels of package idemtype.
func (e *Error) Is(target error) bool {
	switch target {
	case idemtype.ErrNotFound:
		return e.Status == http.StatusNotFound
	case idemtype.ErrInvalid:
		return e.Status == http.StatusBadRequest
	case idemtype.ErrKeyReused:
		return e.Status == http.StatusUnprocessableEntity && strings.HasSuffix(e.Type, "/idempotency-key-reused")
	case idemtype.ErrWrongState:
		return strings.HasSuffix(e.Type, "/wrong-state")
	case idemtype.ErrLeaseLost:
		return strings.HasSuffix(e.Type, "/lease-lost")
	case idemtype.ErrKeyInProgress:
		return strings.HasSuffix(e.Type, "/idempotency-key-in-progress")
	case idemtype.ErrConflict:
		return e.Status == http.StatusConflict && strings.HasSuffix(e.Type, "/conflict")
	case idemtype.ErrUnavailable:
		return e.Status == http.StatusServiceUnavailable && strings.HasSuffix(e.Type, "/service-unavailable")
	}
	return false
}

// NewKey returns a random idempotency key.
func NewKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// keyHeader is the Idempotency-Key header value that carries key. The
// server reads a value that starts with '"' as a Structured Field string
// (RFC 8941: "a\"b" is the key a"b), and HTTP drops the spaces around a
// header value; so a key that starts with '"' (a JSON-encoded id,
// `"order-1"`) or with or before a space is sent as an sf-string, quoted
// with '"' and '\' escaped. Any other key is sent as it is.
func keyHeader(key string) string {
	if key == "" || (key[0] != '"' && key[0] != ' ' && key[len(key)-1] != ' ') {
		return key
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `"` + r.Replace(key) + `"`
}

// checkHeaderKey refuses a caller's key that cannot travel as the
// Idempotency-Key header: a byte outside printable ASCII (0x20–0x7E), which
// the server refuses. Sent, a control character makes net/http refuse the
// request (a transport error, retried), and a tab or space at an end is
// dropped from the header value: the server would read another key. The
// refusal is an *idemtype.InvalidError naming field (errors.Is ErrInvalid).
func checkHeaderKey(field, key string) error {
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return idemtype.Invalid(field, "must be printable ASCII (0x20-0x7E)")
		}
	}
	return nil
}

// call is one API call.
type call struct {
	method, path string
	query        url.Values
	body         any
	key          string // Idempotency-Key; made for POSTs when "" unless bodyKey
	// bodyKey: the body carries the idempotency key; no header is sent
	// (a retry repeats the body, so it is deduplicated by that key).
	bodyKey bool
	out     any // decoded on 2xx
	header  *http.Header
	// outOnError: decode the body into out on an error status too (a
	// reply that carries data with its failure, as /readyz's 503).
	outOnError bool
	// once: no retries (a probe reports the state of now; a delete whose
	// retry could hit what another client re-created meanwhile).
	once bool
	// goneAt, for a DELETE whose 404 does not always mean gone (a
	// dead-letter delete answers 404 for a job that is not dead): a
	// retry's 404 counts as deleted only when this path answers 404 too.
	goneAt string
}

// marshal encodes v as a request body: as json.Marshal does, but without
// HTML escaping, so that '<', '>' and '&' in args, metadata and results
// travel as they are, not as six-byte \u003c escapes that count against
// the server's body and args limits (and were stored so).
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// do sends c with retries and decodes the answer.
func (cl *Client) do(ctx context.Context, c *call) (int, error) {
	var body []byte
	if c.body != nil {
		var err error
		if body, err = marshal(c.body); err != nil {
			return 0, fmt.Errorf("idemclient: encode request: %w", err)
		}
	}
	if c.method == http.MethodPost && c.key == "" && !c.bodyKey {
		c.key = NewKey()
	}
	for attempt := 0; ; attempt++ {
		status, retryAfter, err := cl.once(ctx, c, body)
		if attempt > 0 && c.method == http.MethodDelete && status == http.StatusNotFound {
			// The retry of a DELETE whose earlier attempt may have
			// deleted (its reply was lost): the thing is gone, as asked.
			if c.goneAt == "" || cl.gone(ctx, c.goneAt) {
				return http.StatusNoContent, nil
			}
			return status, err
		}
		if err == nil || c.once || attempt >= cl.cfg.MaxRetries || !retryable(status, err) || ctx.Err() != nil {
			return status, err
		}
		wait := cl.backoff(attempt, retryAfter)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return status, err
		case <-t.C:
		}
	}
}

// retryable: network errors, 5xx, 429, a key still in progress and a
// conflict (409 /problems/conflict, idemtype.ErrConflict: concurrent
// changes kept the operation from completing and nothing was done, so a
// repeat is safe, and the server stores no such answer under the key).
func retryable(status int, err error) bool {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Status >= 500 || pe.Status == http.StatusTooManyRequests ||
			errors.Is(pe, idemtype.ErrKeyInProgress) || errors.Is(pe, idemtype.ErrConflict)
	}
	return status == 0 && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

func (cl *Client) backoff(attempt int, retryAfter time.Duration) time.Duration {
	d := float64(cl.cfg.MinBackoff) * math.Pow(2, float64(attempt))
	d = min(d, float64(cl.cfg.MaxBackoff))
	d = d/2 + mrand.Float64()*d/2
	return max(time.Duration(d), min(retryAfter, cl.cfg.MaxBackoff))
}

// once sends one attempt; it returns the status (0 for a network error).
func (cl *Client) once(ctx context.Context, c *call, body []byte) (int, time.Duration, error) {
	target := cl.base.String() + c.path
	if len(c.query) > 0 {
		target += "?" + c.query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, c.method, target, rd)
	if err != nil {
		return 0, 0, fmt.Errorf("idemclient: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", cl.cfg.UserAgent)
	if cl.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+cl.cfg.APIKey)
	}
	if cl.cfg.Tenant != "" {
		req.Header.Set("Idem-Tenant", cl.cfg.Tenant)
	}
	if c.key != "" {
		req.Header.Set("Idempotency-Key", keyHeader(c.key))
	}
	resp, err := cl.hc.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("idemclient: %s %s: %w", c.method, c.path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return 0, 0, fmt.Errorf("idemclient: read %s %s: %w", c.method, c.path, err)
	}
	if c.header != nil {
		*c.header = resp.Header
	}
	if resp.StatusCode >= 300 {
		if c.outOnError && c.out != nil {
			_ = json.Unmarshal(data, c.out) // best effort: the status is the error
		}
		return resp.StatusCode, parseRetryAfter(resp.Header.Get("Retry-After")), problem(resp.StatusCode, data)
	}
	if c.out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, c.out); err != nil {
			return resp.StatusCode, 0, fmt.Errorf("idemclient: decode %s %s: %w", c.method, c.path, err)
		}
	}
	return resp.StatusCode, 0, nil
}

func problem(status int, data []byte) error {
	e := &Error{}
	if json.Unmarshal(data, e) != nil || e.Status == 0 {
		e = &Error{Title: http.StatusText(status), Detail: strings.TrimSpace(string(data))}
	}
	e.Status = status
	return e
}

func parseRetryAfter(v string) time.Duration {
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	return 0
}

// pathSegment escapes s as one segment of a path. The dot segments "."
// and ".." (valid keys and names) are percent-encoded: sent bare, a server
// removes them and redirects to another resource.
func pathSegment(s string) string {
	switch s {
	case ".":
		return "%2E"
	case "..":
		return "%2E%2E"
	}
	return url.PathEscape(s)
}

func jobPath(id string, suffix string) string {
	return "/v1/jobs/" + pathSegment(id) + suffix
}
