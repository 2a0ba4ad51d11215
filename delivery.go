package idem

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/deliver"
	"github.com/idem-dev/idem/internal/deliver/natstarget"
	"github.com/idem-dev/idem/internal/executor"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/webhook"
)

// DefaultTargetRefresh is how often a client re-reads the stored delivery
// targets (a target put through this client is seen at once).
const DefaultTargetRefresh = 2 * time.Second

// DefaultDeliverySlotWait is how long a push waits for a slot of a target
// at its concurrency cap before its job snoozes and the worker moves on, so
// a slow endpoint never holds the workers of others (used when
// DeliveryConfig.Webhook leaves SlotWait 0).
const DefaultDeliverySlotWait = 50 * time.Millisecond

// DeliveryConfig configures the delivery of jobs to webhook targets.
type DeliveryConfig struct {
	// Webhook configures the HTTP sender shared by every webhook target:
	// default timeout, per-target concurrency cap, body limit, address
	// policy. Nil: webhook.Config's defaults.
	Webhook *webhook.Config
	// TargetRefresh is how often the stored targets are re-read; default
	// DefaultTargetRefresh.
	TargetRefresh time.Duration
}

// Target is a webhook the jobs of a queue or a kind are pushed to (see
// docs/webhooks.md). A job of a queue worked with QueueConfig.Deliver whose
// kind has no Go worker goes to the most specific matching target: one
// naming both its queue and kind, else its kind, else its queue.
type Target struct {
	Tenant string // "" = the client's default tenant
	Name   string // unique per tenant; the attempt log names it
	Queue  string // match jobs of this queue; "" = any queue
	Kind   string // match jobs of this kind; "" = any kind (Queue or Kind is required)
	// URL is an absolute http(s) URL, checked against the address policy,
	// or nats://host:port/subject for a JetStream subject; a NATS server
	// that requires credentials takes nats://user:password@host:port/subject
	// or nats://token@host:port/subject. The HTTP API masks a password or
	// token in it (the stored URL keeps it).
	URL string
	// Secrets sign every push, the first listed first (several while one is
	// rotated). TargetList never returns them; SecretCount says how many.
	Secrets     []webhook.Secret
	SecretCount int
	// KeepSecrets: when TargetPut replaces a stored target, its secrets are
	// kept and Secrets is used only if the put creates it (decided in one
	// statement), so repeating a put never rotates them.
	KeepSecrets bool
	// Timeout bounds one push; 0 = DeliveryConfig.Webhook's timeout. It
	// is stored in whole milliseconds (cut to them); a positive one below
	// 1ms is refused.
	Timeout   time.Duration
	CreatedAt time.Time
	UpdatedAt time.Time
}

// TargetPut creates or replaces a target and reports whether it was created.
// An invalid target is an *idemtype.InvalidError naming the field; nothing is
// stored.
func (c *Client) TargetPut(ctx context.Context, t *Target) (created bool, err error) {
	if t == nil {
		return false, idemtype.Invalid("target", "nil")
	}
	return c.targetPut(ctx, t, nil)
}

// subscriptionRow holds the fields of a stored target that only a
// subscription has.
type subscriptionRow struct {
	topic       string
	types       []string
	maxAttempts int
}

// targetPut stores a target, or a subscription when sub is not nil.
func (c *Client) targetPut(ctx context.Context, t *Target, sub *subscriptionRow) (created bool, err error) {
	if err := ValidateName("name", t.Name); err != nil {
		return false, err
	}
	for field, v := range map[string]string{"queue": t.Queue, "kind": t.Kind} {
		if v == "" {
			continue
		}
		if err := ValidateName(field, v); err != nil {
			return false, err
		}
	}
	if t.Queue == "" && t.Kind == "" {
		return false, idemtype.Invalid("queue", "a target needs a queue or a kind")
	}
	if sub == nil && strings.HasPrefix(t.Kind, TopicKindPrefix) {
		// A plain target of a subscription's kind would outrank it
		// (matchTarget) and take its events.
		return false, idemtype.Invalid("kind", "must not start with %q, which is reserved for topic subscriptions (subscribe to the topic instead)", TopicKindPrefix)
	}
	if t.Timeout < 0 {
		return false, idemtype.Invalid("timeout", "must not be negative")
	}
	if t.Timeout > 0 && t.Timeout < time.Millisecond {
		// Stored in whole milliseconds: it would be 0, the default.
		return false, idemtype.Invalid("timeout", "must be 0 (the default) or a duration of at least 1ms, not %v", t.Timeout)
	}
	if err := c.targets.checkURL(ctx, t.URL); err != nil {
		return false, fmt.Errorf("put target: %w", err)
	}
	secrets := make([]string, len(t.Secrets))
	for i, s := range t.Secrets {
		if s.IsZero() {
			return false, fmt.Errorf("put target: %w", idemtype.Invalid("secrets", "secret %d is empty", i))
		}
		secrets[i] = s.Reveal()
	}
	row := &store.DeliveryTarget{
		Tenant: c.tenant(t.Tenant), Name: t.Name, Queue: t.Queue, Kind: t.Kind, URL: t.URL,
		Secrets: secrets, KeepSecrets: t.KeepSecrets, Timeout: t.Timeout, UpdatedAt: c.now(),
	}
	if sub != nil {
		row.Topic, row.EventTypes, row.MaxAttempts = sub.topic, sub.types, sub.maxAttempts
	}
	created, err = c.store.TargetPut(ctx, row)
	if err != nil {
		return false, err
	}
	c.targets.invalidate()
	return created, nil
}

// TargetList returns the targets of tenant ("" = the default tenant), by
// name, without their secrets.
func (c *Client) TargetList(ctx context.Context, tenant string) ([]*Target, error) {
	rows, err := c.store.TargetList(ctx, &store.TargetListParams{Tenant: c.tenant(tenant)})
	if err != nil {
		return nil, err
	}
	out := make([]*Target, 0, len(rows))
	for _, r := range rows {
		if r.Topic != "" {
			continue // a subscription: SubscriptionList
		}
		out = append(out, &Target{Tenant: r.Tenant, Name: r.Name, Queue: r.Queue, Kind: r.Kind, URL: r.URL,
			SecretCount: len(r.Secrets), Timeout: r.Timeout, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt})
	}
	return out, nil
}

// TargetGet returns the target name of tenant ("" = the default tenant),
// without its secrets; ErrNotFound when there is none.
func (c *Client) TargetGet(ctx context.Context, tenant, name string) (*Target, error) {
	list, err := c.TargetList(ctx, tenant)
	if err != nil {
		return nil, err
	}
	for _, t := range list {
		if t.Name == name {
			return t, nil
		}
	}
	return nil, fmt.Errorf("target %q: %w", name, idemtype.ErrNotFound)
}

// TargetDelete deletes a target; ErrNotFound when there is none. Jobs that
// matched it wait (retrying) for another target.
func (c *Client) TargetDelete(ctx context.Context, tenant, name string) error {
	return c.targetDelete(ctx, tenant, name, "")
}

// targetDelete deletes the target name of topic ("" = a plain target, not a
// subscription; a subscription's target is "topic/name"), so that deleting
// a plain target never deletes a subscription of the same stored name, nor
// the reverse.
func (c *Client) targetDelete(ctx context.Context, tenant, name, topic string) error {
	tenant = c.tenant(tenant)
	rows, err := c.store.TargetList(ctx, &store.TargetListParams{Tenant: tenant})
	if err != nil {
		return err
	}
	if r := findTarget(rows, tenant, name); r != nil && r.Topic != topic {
		return fmt.Errorf("target %q: %w", name, idemtype.ErrNotFound)
	}
	if err := c.store.TargetDelete(ctx, &store.TargetDeleteParams{Tenant: tenant, Name: name}); err != nil {
		return err
	}
	c.targets.invalidate()
	return nil
}

// targetSet resolves the target of a job from the stored targets, re-read
// every refresh interval or after a change made through this client. Built
// targets are kept while their row is unchanged.
type targetSet struct {
	store   store.Store
	sender  *webhook.Sender
	refresh time.Duration
	now     func() time.Time

	mu     sync.Mutex
	rows   []*store.DeliveryTarget
	readAt time.Time // zero: read again
	built  map[string]*builtTarget
	nats   map[string]*nats.Conn // by server address and credentials (natsDial), for nats:// targets
	closes int                   // how many times close ran: a connection dialled across one is not kept
}

// builtTarget is a target ready to deliver, for one version of its row.
type builtTarget struct {
	updatedAt time.Time
	target    deliver.Target
	nc        *nats.Conn // the connection of a NATS target; nil for a webhook
}

// stale reports whether b must be built again for the row version at:
// the row changed, or its NATS connection was closed for good (nats.go
// closes it when its reconnect attempts run out, or Stop did).
func (b *builtTarget) stale(at time.Time) bool {
	return b == nil || !b.updatedAt.Equal(at) || (b.nc != nil && b.nc.IsClosed())
}

// newTargetSet builds the sender and the (empty) set of cfg.
func newTargetSet(st store.Store, cfg *DeliveryConfig, now func() time.Time) (*targetSet, error) {
	var d DeliveryConfig
	if cfg != nil {
		d = *cfg
	}
	setDefault(&d.TargetRefresh, DefaultTargetRefresh)
	var wc webhook.Config
	if d.Webhook != nil {
		wc = *d.Webhook
	}
	setDefault(&wc.SlotWait, DefaultDeliverySlotWait)
	sender, err := webhook.NewSender(&wc)
	if err != nil {
		return nil, fmt.Errorf("delivery: %w", err)
	}
	return &targetSet{store: st, sender: sender, refresh: d.TargetRefresh, now: now, built: map[string]*builtTarget{},
		nats: map[string]*nats.Conn{}}, nil
}

// invalidate makes the next lookup re-read the targets.
func (s *targetSet) invalidate() {
	s.mu.Lock()
	s.readAt = time.Time{}
	s.mu.Unlock()
}

// lookup returns the target of row and its name; nil when none matches.
// A target is built without s.mu held: connecting to a NATS server that
// hangs holds that target's deliveries only, not every lookup.
func (s *targetSet) lookup(ctx context.Context, row *JobRow) (deliver.Target, string, error) {
	r, b, err := s.find(ctx, row)
	if r == nil || b != nil || err != nil {
		return targetOf(b), targetName(r), err
	}
	if b, err = s.build(r); err != nil {
		return nil, r.Name, err
	}
	b.updatedAt = r.UpdatedAt
	s.mu.Lock()
	s.built[r.Tenant+"\x00"+r.Name] = b
	s.mu.Unlock()
	return b.target, r.Name, nil
}

// find returns the stored target of row (nil when none matches) and its
// built target when one is current for its row.
func (s *targetSet) find(ctx context.Context, row *JobRow) (*store.DeliveryTarget, *builtTarget, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.readLocked(ctx); err != nil {
		return nil, nil, err
	}
	r := matchTarget(s.rows, row)
	if name := namedTarget(row.Metadata); name != "" {
		r = findTarget(s.rows, row.Tenant, name)
		if r == nil {
			return nil, nil, fmt.Errorf("%w: job names target %q", executor.ErrNoTarget, name)
		}
		if r.Topic != "" {
			// Named before the subscription took the name (enqueue
			// refuses it since), or enqueued by an older version: a job is
			// never pushed to a subscription's URL with its secrets as if
			// it were an event of the topic. Dead: only deleting the
			// subscription would free the name.
			return nil, nil, &idemtype.ControlError{Kind: idemtype.ControlPermanent, Err: errNamesSubscription(name, r)}
		}
	}
	if r == nil {
		return nil, nil, nil
	}
	if b := s.built[r.Tenant+"\x00"+r.Name]; !b.stale(r.UpdatedAt) {
		return r, b, nil
	}
	return r, nil, nil
}

// readLocked re-reads the stored targets when the refresh interval has
// passed or a change made through this client invalidated them. s.mu is
// held.
func (s *targetSet) readLocked(ctx context.Context) error {
	if now := s.now(); s.readAt.IsZero() || now.Sub(s.readAt) >= s.refresh {
		rows, err := s.store.TargetList(ctx, &store.TargetListParams{})
		if err != nil {
			return fmt.Errorf("read delivery targets: %w", err)
		}
		s.rows, s.readAt = rows, now
	}
	return nil
}

// namedSubscriptions returns, by index in jobs, the *idemtype.InvalidError
// on "metadata" refusing each job whose metadata names as its delivery
// target (MetaDeliveryTarget) the stored target of a subscription (nil
// jobs are skipped); nil when none does. The targets are those of the
// last read, re-read as lookup does: a subscription put through another
// client less than DeliveryConfig.TargetRefresh ago may not be seen, and
// its job is then refused at delivery instead.
func (s *targetSet) namedSubscriptions(ctx context.Context, jobs []*store.JobInsertParams) (map[int]error, error) {
	var names []string // allocated at the first job naming a target
	for i, p := range jobs {
		if p == nil {
			continue
		}
		if name := namedTarget(p.Metadata); name != "" {
			if names == nil {
				names = make([]string, len(jobs))
			}
			names[i] = name
		}
	}
	if names == nil {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.readLocked(ctx); err != nil {
		return nil, err
	}
	var refused map[int]error
	for i, name := range names {
		if name == "" {
			continue
		}
		if r := findTarget(s.rows, jobs[i].Tenant, name); r != nil && r.Topic != "" {
			if refused == nil {
				refused = map[int]error{}
			}
			refused[i] = idemtype.Invalid("metadata", "%v", errNamesSubscription(name, r))
		}
	}
	return refused, nil
}

// errNamesSubscription is the error of a job whose metadata names r, the
// stored target of a subscription, as its delivery target.
func errNamesSubscription(name string, r *store.DeliveryTarget) error {
	return fmt.Errorf("%s %q is the target of a subscription of topic %q, which receives the topic's events only: a job can name a target put with TargetPut",
		MetaDeliveryTarget, name, r.Topic)
}

// targetOf is b's target; nil for none.
func targetOf(b *builtTarget) deliver.Target {
	if b == nil {
		return nil
	}
	return b.target
}

// targetName is r's name; "" for none.
func targetName(r *store.DeliveryTarget) string {
	if r == nil {
		return ""
	}
	return r.Name
}

// checkURL validates a target URL: http(s) against the sender's address
// policy, or nats://host:port/subject.
func (s *targetSet) checkURL(ctx context.Context, raw string) error {
	if strings.HasPrefix(raw, "nats://") {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" || strings.Trim(u.Path, "/") == "" {
			return idemtype.Invalid("url", "want nats://host:port/subject")
		}
		// One server: a server list (a ',' in the host, or a second
		// user info) would be stored with its other servers and their
		// credentials read as the subject, shown unmasked.
		authority, _, _ := strings.Cut(strings.TrimPrefix(raw, "nats://"), "/")
		if strings.Contains(u.Host, ",") || strings.Count(authority, "@") > 1 {
			return idemtype.Invalid("url", "want nats://host:port/subject: one server, with '@' and ',' in credentials percent-encoded")
		}
		if strings.ContainsAny(raw, "?#") {
			// url.Parse takes them for a query or fragment, which the
			// subject published to (the path) leaves out.
			return idemtype.Invalid("url", "want nats://host:port/subject: a '?' or '#' percent-encoded (%%3F, %%23), in the subject as in credentials")
		}
		if !literalSubject(strings.Trim(u.Path, "/")) {
			return idemtype.Invalid("url", "want nats://host:port/subject: a subject to publish to, its tokens separated by '.', none empty, '*' or '>', without white space or control characters")
		}
		if strings.HasPrefix(strings.Trim(u.Path, "/"), "$") {
			// A publish there is a request to the server's own API
			// ($JS.API.STREAM.DELETE.<name> is a stream's deletion).
			return idemtype.Invalid("url", "want nats://host:port/subject: a subject not starting with '$', which NATS reserves for itself ($JS. for the JetStream API, $KV., $O., $SYS., ...)")
		}
		if n := len(strings.Trim(u.Path, "/")); n > maxNATSSubject {
			return idemtype.Invalid("url", "want nats://host:port/subject: a subject of at most %d bytes, not %d (a NATS server closes the connection that publishes to a longer one)", maxNATSSubject, n)
		}
		return nil
	}
	if err := s.sender.CheckURL(ctx, raw); err != nil {
		return idemtype.Invalid("url", "%v", err)
	}
	return nil
}

// maxNATSSubject is the longest subject of a nats:// target, in bytes. A
// publish's control line (HPUB, the subject, the reply subject and two
// sizes) must fit the 4,096 bytes a NATS server reads by default
// (max_control_line); over that the server closes the connection, which
// the other targets of that server share.
const maxNATSSubject = 4000

// literalSubject reports whether subject is a NATS subject a message can
// be published to: tokens separated by '.', none empty nor a wildcard ('*',
// '>'), and no white space or control character anywhere (they break the
// protocol).
func literalSubject(subject string) bool {
	for tok := range strings.SplitSeq(subject, ".") {
		if tok == "" || tok == "*" || tok == ">" {
			return false
		}
		for i := 0; i < len(tok); i++ {
			if c := tok[i]; c <= ' ' || c == 0x7f {
				return false
			}
		}
	}
	return true
}

// close drops idle HTTP connections and closes the NATS connections.
func (s *targetSet) close() {
	s.sender.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	for addr, nc := range s.nats {
		nc.Close()
		delete(s.nats, addr)
	}
	s.built = map[string]*builtTarget{}
	s.closes++
}

// buildNATS makes the JetStream target of a nats://host:port/subject row
// (with user:password@ or token@ before the host when the server requires
// them), connecting to the server once per address and credentials (a
// closed connection is replaced). The connection reconnects without limit: an outage of the
// server delays deliveries (they retry) but never ends the connection.
// s.mu is not held.
func (s *targetSet) buildNATS(r *store.DeliveryTarget) (*builtTarget, error) {
	u, err := url.Parse(r.URL)
	if err != nil {
		// Not the error itself: it quotes the URL, credentials included.
		return nil, fmt.Errorf("target %q: malformed nats URL", r.Name)
	}
	nc, err := s.natsConn(u)
	if err != nil {
		return nil, fmt.Errorf("target %q: %w", r.Name, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("target %q: jetstream: %w", r.Name, err)
	}
	t, err := natstarget.New(js, &natstarget.Config{Subject: strings.Trim(u.Path, "/"), Timeout: r.Timeout})
	if err != nil {
		return nil, fmt.Errorf("target %q: %w", r.Name, err)
	}
	return &builtTarget{target: t, nc: nc}, nil
}

// natsConn returns the open connection to the NATS server of u, dialling
// it when there is none. The dial (up to its 5 s timeout when the server
// does not answer) runs without s.mu held; when two dials race, the first
// kept wins and the other is closed, and one that a close overtook is not
// kept.
func (s *targetSet) natsConn(u *url.URL) (*nats.Conn, error) {
	addr, key, opts := natsDial(u)
	s.mu.Lock()
	nc, closes := s.nats[key], s.closes
	s.mu.Unlock()
	if nc != nil && !nc.IsClosed() {
		return nc, nil
	}
	opts = append(opts, nats.Name("idem"), nats.Timeout(5*time.Second), nats.MaxReconnects(-1))
	nc, err := nats.Connect(addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to nats at %s: %w", u.Host, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closes != closes {
		nc.Close()
		return nil, fmt.Errorf("connect to nats at %s: delivery stopped", u.Host)
	}
	if cur := s.nats[key]; cur != nil && !cur.IsClosed() {
		nc.Close()
		return cur, nil
	}
	s.nats[key] = nc
	return nc, nil
}

// natsDial returns what buildNATS connects with for the target URL u: the
// server address (without credentials), the key of the connection in the
// cache (the address and the credentials: targets that authenticate
// differently never share a connection) and the options that carry the
// credentials: nats://user:password@host:port/subject authenticates with a
// user and password, nats://token@host:port/subject with a token. The
// credentials are never logged nor put in an error.
func natsDial(u *url.URL) (addr, key string, opts []nats.Option) {
	addr = "nats://" + u.Host
	key = addr
	if u.User == nil {
		return addr, key, nil
	}
	user := u.User.Username()
	if pass, ok := u.User.Password(); ok {
		opts = append(opts, nats.UserInfo(user, pass))
		key += "\x00user\x00" + user + "\x00" + pass
	} else if user != "" {
		opts = append(opts, nats.Token(user))
		key += "\x00token\x00" + user
	}
	return addr, key, opts
}

// build makes the webhook or NATS target of a row.
func (s *targetSet) build(r *store.DeliveryTarget) (*builtTarget, error) {
	if strings.HasPrefix(r.URL, "nats://") {
		return s.buildNATS(r)
	}
	secrets := make([]webhook.Secret, len(r.Secrets))
	for i, raw := range r.Secrets {
		sec, err := webhook.ParseSecret(raw)
		if err != nil {
			return nil, &idemtype.ControlError{Kind: idemtype.ControlPermanent, Err: fmt.Errorf("target %q: secret %d: %w", r.Name, i, err)}
		}
		secrets[i] = sec
	}
	t, err := deliver.NewWebhook(s.sender, &deliver.WebhookConfig{URL: r.URL, Secrets: secrets, Timeout: r.Timeout})
	if err != nil {
		return nil, fmt.Errorf("target %q: %w", r.Name, err)
	}
	return &builtTarget{target: t}, nil
}

// MetaDeliveryTarget is the job metadata field that names the stored target
// a job goes to, over the match by queue and kind (seed 003's per-job
// delivery targets): EnqueueOpts.Metadata {"delivery_target": "orders"}.
const MetaDeliveryTarget = "delivery_target"

// namedTarget returns the target a job's metadata names, or "".
func namedTarget(meta json.RawMessage) string {
	if len(meta) == 0 || !bytes.Contains(meta, []byte(MetaDeliveryTarget)) {
		return ""
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(meta, &m) != nil {
		return ""
	}
	var name string
	_ = json.Unmarshal(m[MetaDeliveryTarget], &name)
	return name
}

// findTarget returns the target name of tenant, or nil.
func findTarget(rows []*store.DeliveryTarget, tenant, name string) *store.DeliveryTarget {
	for _, r := range rows {
		if r.Tenant == tenant && r.Name == name {
			return r
		}
	}
	return nil
}

// matchTarget returns the most specific target of row's tenant: queue and
// kind, then kind, then queue; by name among equals.
func matchTarget(rows []*store.DeliveryTarget, row *JobRow) *store.DeliveryTarget {
	var best *store.DeliveryTarget
	bestRank := 0
	for _, r := range rows {
		if r.Tenant != row.Tenant || (r.Queue != "" && r.Queue != row.Queue) || (r.Kind != "" && r.Kind != row.Kind) {
			continue
		}
		rank := 1
		if r.Kind != "" {
			rank = 2
		}
		if r.Kind != "" && r.Queue != "" {
			rank = 3
		}
		if rank > bestRank || rank == bestRank && r.Name < best.Name {
			best, bestRank = r, rank
		}
	}
	return best
}
