package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/idem-dev/idem/internal/redact"
)

// Defaults for [Config].
const (
	DefaultTimeout      = 30 * time.Second
	DefaultMaxPerTarget = 8
	DefaultMaxBodyBytes = 64 << 10
	DefaultSlotWait     = 5 * time.Second
	DefaultUserAgent    = "idem-webhook/1"
)

// Config configures a [Sender]. The zero value is usable.
type Config struct {
	// Timeout bounds one push, from connecting to reading the body.
	// Default DefaultTimeout; Request.Timeout overrides it per target.
	Timeout time.Duration
	// MaxPerTarget caps concurrent pushes to one target (scheme://host:port),
	// so a slow endpoint holds at most this many pushes and never the
	// others' slots. Default DefaultMaxPerTarget.
	MaxPerTarget int
	// SlotWait is how long Send waits for a slot of a saturated target before
	// giving up with ErrTargetBusy (class retry). Default DefaultSlotWait;
	// negative: do not wait.
	SlotWait time.Duration
	// MaxBodyBytes is how much of a response body is read. Default
	// DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// FollowRedirects follows up to 10 redirects that repeat the POST with
	// its body (307, 308) within the origin of the target's URL: the same
	// scheme, host and port, whose connections the address policy checks
	// and whose concurrency cap the push holds. A 301, 302 or 303 is not
	// followed (net/http would send a GET without the body, whose answer
	// would complete a push never delivered), nor is a redirect to another
	// origin (its signature and headers are for the target's URL only:
	// another server, or plain http after https, never receives them), one
	// whose Location is empty or unparsable, or an eleventh one: each is
	// dead, as every 3xx is by default (false).
	FollowRedirects bool
	// DenyPrivate also refuses loopback, private (RFC 1918, fc00::/7), CGNAT
	// and unspecified addresses. Link-local and cloud-metadata addresses are
	// always refused.
	DenyPrivate bool
	// Allow lists prefixes permitted even when a rule above refuses them.
	Allow []netip.Prefix
	// Resolver resolves target hosts. Default net.DefaultResolver.
	Resolver Resolver
	// Now is the clock for webhook-timestamp and Retry-After dates.
	// Default time.Now.
	Now func() time.Time
	// UserAgent is sent with every push. Default DefaultUserAgent.
	UserAgent string
}

// Sender pushes webhooks over HTTP with an address policy checked at connect
// time, per-target timeouts and concurrency caps, and bounded body reads.
// It is safe for concurrent use.
type Sender struct {
	cfg    Config
	policy addrPolicy
	// transport sends each request of a push: redirects are followed by
	// do, not by an http.Client, which would carry the signature and
	// every header to another origin and fail a redirect with an
	// unparsable Location as a transport error (class retry) before any
	// CheckRedirect could refuse it.
	transport *http.Transport
	slots     *targetSlots
}

// NewSender returns a sender for cfg (nil: all defaults).
func NewSender(cfg *Config) (*Sender, error) {
	c, err := withDefaults(cfg)
	if err != nil {
		return nil, err
	}
	policy := addrPolicy{allow: c.Allow, denyPrivate: c.DenyPrivate}
	dialer := &guardedDialer{
		resolver: c.Resolver,
		dialer:   &net.Dialer{Timeout: c.Timeout, KeepAlive: 30 * time.Second, Control: policy.control},
	}
	transport := &http.Transport{
		Proxy:                 nil, // a proxy would connect on our behalf, past the address policy
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   c.MaxPerTarget,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &Sender{cfg: c, policy: policy, transport: transport, slots: newTargetSlots(c.MaxPerTarget)}, nil
}

// maxRedirects is how many redirects a push follows (net/http's default).
const maxRedirects = 10

// isRedirect reports whether status is one net/http would follow: 301,
// 302, 303, 307 or 308 (not 300, 304, 305 nor 306).
func isRedirect(status int) bool {
	switch status {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// redirectTarget returns the URL a followed redirect resp of the push to
// from leads to, and "" with it; or nil and why the redirect is not
// followed (its 3xx is then the push's answer, class dead, instead of a
// push that delivers nothing, a transport error of class retry pushed
// again on every attempt, or one that leaves the target's origin). hops
// is how many redirects were followed before this one.
func redirectTarget(from *url.URL, resp *http.Response, hops int) (*url.URL, string) {
	if resp.StatusCode != http.StatusTemporaryRedirect && resp.StatusCode != http.StatusPermanentRedirect {
		// net/http turns the POST of a 301, 302 or 303 into a GET
		// without a body.
		return nil, "only a 307 or 308 repeats the POST with its body"
	}
	if hops >= maxRedirects {
		return nil, fmt.Sprintf("more than %d redirects", maxRedirects)
	}
	loc := resp.Header.Get("Location")
	if loc == "" {
		return nil, "no Location"
	}
	to, err := from.Parse(loc)
	if err != nil {
		// Not err itself: it quotes the whole URL, credentials included.
		return nil, "unparsable Location"
	}
	if (to.Scheme != "http" && to.Scheme != "https") || to.Host == "" {
		return nil, fmt.Sprintf("Location %q is not an http(s) URL", redact.URL(to.String()))
	}
	if targetKey(to) != targetKey(from) {
		return nil, fmt.Sprintf("Location %q is on another origin than %s", redact.URL(to.String()), targetKey(from))
	}
	to.User = nil // the push authenticates with the target URL's credentials, if any
	return to, ""
}

// withDefaults validates cfg and fills its zero fields.
func withDefaults(cfg *Config) (Config, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Timeout < 0 || c.MaxPerTarget < 0 || c.MaxBodyBytes < 0 {
		return c, errors.New("webhook: negative Timeout, MaxPerTarget or MaxBodyBytes")
	}
	c.Timeout = cmpOr(c.Timeout, DefaultTimeout)
	c.MaxPerTarget = cmpOr(c.MaxPerTarget, DefaultMaxPerTarget)
	c.MaxBodyBytes = cmpOr(c.MaxBodyBytes, DefaultMaxBodyBytes)
	c.SlotWait = cmpOr(c.SlotWait, DefaultSlotWait)
	c.UserAgent = cmpOr(c.UserAgent, DefaultUserAgent)
	if c.Resolver == nil {
		c.Resolver = net.DefaultResolver
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, nil
}

// cmpOr returns v, or def when v is zero.
func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Request is one push.
type Request struct {
	URL  string // absolute http or https URL
	ID   string // webhook-id: stable across retries of one message
	Body []byte // JSON payload
	// Signer signs the request; nil sends it unsigned (no webhook-signature).
	Signer *Signer
	// Header holds extra headers; Content-Type defaults to application/json.
	Header http.Header
	// Timeout overrides Config.Timeout for this target when positive.
	Timeout time.Duration
}

// Close releases idle connections.
func (s *Sender) Close() { s.transport.CloseIdleConnections() }

// Send pushes r once and classifies the result. It never returns a nil Err
// unless the class is ClassCompleted.
func (s *Sender) Send(ctx context.Context, r *Request) Outcome {
	u, err := parseTarget(r.URL)
	if err != nil {
		return Outcome{Class: ClassDead, Err: err}
	}
	if r.Signer != nil && r.ID == "" {
		return Outcome{Class: ClassDead, Err: errors.New("webhook: a signed request needs an ID")}
	}
	release, err := s.slots.acquire(ctx, targetKey(u), s.cfg.SlotWait)
	if err != nil {
		return Outcome{Class: ClassRetry, Err: err}
	}
	defer release()
	timeout := s.cfg.Timeout
	if r.Timeout > 0 {
		timeout = r.Timeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return s.do(ctx, u, r)
}

// do sends the request, follows its redirects when configured and reads
// the response.
func (s *Sender) do(ctx context.Context, u *url.URL, r *Request) Outcome {
	start := time.Now()
	var (
		resp *http.Response
		why  string // why a redirect was not followed
	)
	creds := u.User // of the target's URL, sent to every hop of its origin
	for hops := 0; ; hops++ {
		var out *Outcome
		resp, out = s.send(ctx, u, creds, r)
		if out != nil {
			out.Latency = time.Since(start)
			return *out
		}
		if !s.cfg.FollowRedirects || !isRedirect(resp.StatusCode) {
			break
		}
		next, reason := redirectTarget(u, resp, hops)
		if next == nil {
			why = reason
			break
		}
		// Read a little of the body so the connection can be reused.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
		u = next
	}
	defer resp.Body.Close()
	body, truncated, readErr := readLimited(resp.Body, s.cfg.MaxBodyBytes)
	out := Outcome{
		Class: classifyStatus(resp.StatusCode), Status: resp.StatusCode, Latency: time.Since(start),
		RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), s.cfg.Now()),
		Body:       body, Truncated: truncated,
	}
	switch {
	case out.Class != ClassCompleted:
		out.Err = &StatusError{Status: resp.StatusCode, Redirect: why}
	case readErr != nil:
		out.Class, out.Err = ClassRetry, fmt.Errorf("read response: %w", readErr)
	}
	return out
}

// send makes one request of the push r to u, with the basic auth of creds
// when not nil: its response, or the outcome of a request that got none.
func (s *Sender) send(ctx context.Context, u *url.URL, creds *url.Userinfo, r *Request) (*http.Response, *Outcome) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(r.Body))
	if err != nil {
		return nil, &Outcome{Class: ClassDead, Err: fmt.Errorf("build request: %w", err)}
	}
	for k, vs := range r.Header {
		req.Header[k] = append([]string(nil), vs...)
	}
	if req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("User-Agent", s.cfg.UserAgent)
	if r.Signer != nil {
		r.Signer.SetHeaders(req.Header, r.ID, s.cfg.Now(), r.Body)
	} else if r.ID != "" {
		req.Header.Set(HeaderID, r.ID)
	}
	if creds != nil && req.Header.Get("Authorization") == "" {
		// As an http.Client does for a URL with credentials.
		pass, _ := creds.Password()
		req.SetBasicAuth(creds.Username(), pass)
	}
	resp, err := s.transport.RoundTrip(req)
	if err != nil {
		// As an http.Client reports it, the URL without its password.
		err = &url.Error{Op: "Post", URL: redact.URL(u.String()), Err: err}
		return nil, &Outcome{Class: classifyError(err), Err: fmt.Errorf("push: %w", err)}
	}
	return resp, nil
}

// readLimited reads up to limit bytes and reports whether more followed.
func readLimited(r io.Reader, limit int64) ([]byte, bool, error) {
	body, err := io.ReadAll(io.LimitReader(r, limit+1))
	if int64(len(body)) > limit {
		return body[:limit], true, err
	}
	return body, false, err
}

// CheckURL validates a target when it is registered: an absolute http(s) URL
// whose host resolves only to permitted addresses. Send checks again at
// connect time, whatever the DNS answers then.
func (s *Sender) CheckURL(ctx context.Context, rawURL string) error {
	u, err := parseTarget(rawURL)
	if err != nil {
		return err
	}
	d := guardedDialer{resolver: s.cfg.Resolver}
	addrs, err := d.lookup(ctx, u.Hostname())
	if err != nil {
		return fmt.Errorf("check url: %w", err)
	}
	for _, a := range addrs {
		if err := s.policy.check(a); err != nil {
			return err
		}
	}
	return nil
}

// parseTarget accepts absolute http and https URLs with a host.
func parseTarget(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// Not err itself: url.Parse quotes the whole URL, password
		// included, and this error reaches problem bodies and logs.
		return nil, fmt.Errorf("%w: %s", ErrInvalidURL, redact.Unparsable)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// redact.URL, not u.Redacted: a user name alone may be a token
		// (nats://token@host in a scheme spelt in capitals).
		return nil, fmt.Errorf("%w: %q", ErrInvalidURL, redact.URL(raw))
	}
	return u, nil
}

// targetKey identifies a target for its concurrency cap.
func targetKey(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return u.Scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}
