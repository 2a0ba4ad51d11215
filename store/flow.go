package store

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/idem-dev/idem/idemtype"
)

// FlowControl is the part of the Store that holds limits and pauses. Both
// live in the database, so every process sharing the store enforces them at
// claim time (see JobClaim).
//
// A flow-control scope is (Tenant, Queue): Tenant "" means every tenant
// together (a queue limit), Queue "" means every queue together (a tenant
// limit); both set is one tenant's work in one queue. Both "" is invalid.
type FlowControl interface {
	// LimitPut creates or replaces the limit of a scope and returns it as
	// kept: the Period in whole microseconds (cut to them). A changed
	// Period or Rate starts a new rate window.
	LimitPut(ctx context.Context, p *LimitPutParams) (*Limit, error)
	// LimitList returns every limit (Tenant "" = all tenants' scopes, else
	// the scopes naming Tenant) with its current usage, ordered by
	// (Tenant, Queue).
	LimitList(ctx context.Context, p *LimitListParams) ([]*Limit, error)
	// LimitDelete removes the limit of a scope; ErrNotFound if it has none.
	LimitDelete(ctx context.Context, p *LimitDeleteParams) error
	// QueuePause stops claims of a queue (Tenant "") or of one tenant's
	// work in a queue, on every node. Paused jobs stay available; running
	// jobs finish. Pausing twice is not an error.
	QueuePause(ctx context.Context, p *QueuePauseParams) error
	// QueueResume undoes QueuePause; resuming what is not paused is not an
	// error.
	QueueResume(ctx context.Context, p *QueuePauseParams) error
	// QueuePauseList returns the paused scopes, ordered by (Queue, Tenant).
	QueuePauseList(ctx context.Context) ([]FlowScope, error)
}

// FlowScope names a scope of flow control (see FlowControl).
type FlowScope struct {
	Tenant string
	Queue  string
}

// Validate reports an *idemtype.InvalidError when the scope names neither a
// tenant nor a queue.
func (s FlowScope) Validate() error {
	if s.Tenant == "" && s.Queue == "" {
		return idemtype.Invalid("scope", "a tenant, a queue or both")
	}
	return nil
}

// applies reports whether the scope covers work of tenant in queue.
func (s FlowScope) applies(tenant, queue string) bool {
	return (s.Tenant == "" || s.Tenant == tenant) && (s.Queue == "" || s.Queue == queue)
}

// Limit is the limit of one scope and, when read, its usage.
type Limit struct {
	FlowScope
	// Rate is the most jobs started per Period (0 = no rate limit). The
	// budget is a fixed window: it refills at every multiple of Period
	// since the Unix epoch.
	Rate   int
	Period time.Duration
	// Concurrency is the most jobs of the scope running at once (0 = no
	// concurrency limit). A job of a FIFO partition cancelled while it ran
	// counts as running while it holds its partition (JobCancel): its
	// handler may still run.
	Concurrency int
	// Weight is the tenant's share of a claim relative to other tenants
	// (0 = 1): a claim gives each visited tenant ceil(limit × weight /
	// sum of weights). Only for scopes naming a tenant.
	Weight int

	// Usage, as read by LimitList (ignored by LimitPut).
	Running     int       // jobs of the scope running now (holds of cancelled jobs included, as Concurrency counts them)
	WindowStart time.Time // start of the rate window WindowUsed counts
	WindowUsed  int       // jobs started in that window
	Throttled   int64     // claims that left work of the scope behind for this limit

	inherited bool // a tenant's copy of a default limit, made by a claim's budget
}

// Validate reports an *idemtype.InvalidError naming the first bad field.
func (l *Limit) Validate() error {
	if err := l.FlowScope.Validate(); err != nil {
		return err
	}
	switch {
	case l.Rate < 0:
		return idemtype.Invalid("rate", "must not be negative")
	case l.Rate > MaxLimitValue:
		return idemtype.Invalid("rate", "N must be at most %d", MaxLimitValue)
	case l.Concurrency > MaxLimitValue:
		return idemtype.Invalid("concurrency", "must be at most %d", MaxLimitValue)
	case l.Rate > 0 && l.Period < time.Millisecond:
		return idemtype.Invalid("rate", "the period must be at least 1ms")
	case l.Concurrency < 0:
		return idemtype.Invalid("concurrency", "must not be negative")
	case l.Weight < 0 || l.Weight > MaxWeight:
		return idemtype.Invalid("weight", "must be between 1 and %d", MaxWeight)
	case l.Weight > 0 && l.Tenant == "":
		return idemtype.Invalid("weight", "only a tenant has a weight")
	case l.Weight > 0 && l.IsDefault():
		return idemtype.Invalid("weight", "a default limit (tenant %q) has no weight", EveryTenant)
	case l.Rate == 0 && l.Concurrency == 0 && l.Weight == 0:
		return idemtype.Invalid("rate", "a rate, a concurrency, a weight or a combination")
	}
	return nil
}

// MaxLimitValue is the largest rate count and concurrency (the stores keep
// them as 32-bit integers).
const MaxLimitValue = math.MaxInt32

// MaxWeight is the largest tenant weight.
const MaxWeight = 1000

// Limited reports whether l caps anything (a rate or a concurrency); a
// weight alone only shapes fair shares.
func (l *Limit) Limited() bool { return l.Rate > 0 || l.Concurrency > 0 }

// WindowAt returns the start of the rate window of l holding now (l must
// have a rate).
func (l *Limit) WindowAt(now time.Time) time.Time { return l.windowStart(now) }

// windowStart returns the start of the rate window holding now.
func (l *Limit) windowStart(now time.Time) time.Time {
	p := l.Period.Microseconds()
	us := now.UnixMicro()
	return time.UnixMicro(us - ((us%p)+p)%p).UTC()
}

// LimitPutParams sets a limit.
type LimitPutParams struct {
	Limit Limit
	Now   time.Time
}

// LimitListParams selects limits.
type LimitListParams struct {
	Tenant string // "" = every limit
	Now    time.Time
}

// LimitDeleteParams removes a limit.
type LimitDeleteParams struct {
	Scope FlowScope
}

// QueuePauseParams names a paused scope: Queue is required; Tenant "" is
// the whole queue.
type QueuePauseParams struct {
	Scope FlowScope
}

// Validate reports an *idemtype.InvalidError when Queue is empty.
func (p *QueuePauseParams) Validate() error {
	if p.Scope.Queue == "" {
		return idemtype.Invalid("queue", "required")
	}
	if p.Scope.IsDefault() {
		return idemtype.Invalid("tenant", "%q names default limits, not a tenant to pause", EveryTenant)
	}
	return nil
}

// ClaimReport tells the caller of JobClaim about throttling (JobClaimParams.Report).
type ClaimReport struct {
	// Throttled is true when a limit left claimable work behind.
	Throttled bool
	// NextRefill is the earliest end of a rate window that throttled this
	// claim (zero when only concurrency limits did): claiming again before
	// it finds the same budget.
	NextRefill time.Time
}

// ClaimBudget is the one rule of limits and pauses during a claim; both
// stores load the flow-control rows and the running counts, build it, ask
// it for each tenant's quota and store what it used. It is not safe for
// concurrent use.
type ClaimBudget struct {
	now      time.Time
	weights  []*Limit                  // scopes with a weight
	limits   []*Limit                  // explicit limits, then tenants' inherited copies of defaults
	defaults []*Limit                  // limits of tenant EveryTenant
	window   WindowLookup              // tenants' windows under defaults
	running  map[string][]RunningCount // by tenant
	has      map[FlowScope]bool        // scopes of limits (explicit or inherited)
	first    map[string]int            // first limit of each Tenant ("" = every tenant)
	next     []int                     // next limit of the same Tenant (-1 = none), ascending
	left     []int                     // remaining budget per limit (-1 = unbounded)
	used     []int
	hit      []bool
	spent    []spentMark // limits found spent, hit only once HeldBack finds work they held back
	paused   []FlowScope
}

// spentMark is a limit (index into ClaimBudget.limits) that QueueOpen or
// Excluded found spent for a claim of queue.
type spentMark struct {
	limit int
	queue string
}

// NewClaimBudget builds the budget of one claim from the limits (with
// Running, WindowStart and WindowUsed loaded) and the paused scopes. A
// default limit (tenant EveryTenant) applies through each tenant's
// inherited copy (see SetInherited).
func NewClaimBudget(now time.Time, limits []*Limit, paused []FlowScope) *ClaimBudget {
	own, defaults := splitDefaults(limits)
	b := &ClaimBudget{now: now, limits: own, defaults: defaults, paused: paused,
		left: make([]int, len(own)), used: make([]int, len(own)), hit: make([]bool, len(own))}
	b.first, b.next = make(map[string]int, len(own)), make([]int, len(own))
	for i := len(own) - 1; i >= 0; i-- {
		l := own[i]
		b.left[i] = l.budget(now)
		b.next[i] = -1
		if j, ok := b.first[l.Tenant]; ok {
			b.next[i] = j
		}
		b.first[l.Tenant] = i
	}
	if len(defaults) > 0 {
		b.has = make(map[FlowScope]bool, len(own))
		for _, l := range own {
			b.has[l.FlowScope] = true
		}
	}
	return b
}

// budget returns what is left of l at now (-1 = unbounded).
func (l *Limit) budget(now time.Time) int {
	left := -1
	if l.Rate > 0 {
		ws := l.windowStart(now)
		switch {
		case l.WindowStart.Equal(ws):
			left = max(0, l.Rate-l.WindowUsed)
		case l.WindowStart.After(ws):
			// A claim whose Now lags behind another node's (clock skew,
			// or a claim that waited for the lock) must not reopen a
			// window that has passed: it gets nothing this time.
			left = 0
		default:
			left = l.Rate
		}
	}
	if l.Concurrency > 0 {
		c := max(0, l.Concurrency-l.Running)
		if left < 0 || c < left {
			left = c
		}
	}
	return left
}

// QueueOpen reports whether queue may be claimed from at all: it is not
// paused and no queue-wide limit is spent. A spent limit throttles the
// claim only if it held work back (SpentScopes, HeldBack).
func (b *ClaimBudget) QueueOpen(queue string) bool {
	for _, p := range b.paused {
		if p.Tenant == "" && p.Queue == queue {
			return false
		}
	}
	for i, l := range b.limits {
		if l.Tenant == "" && l.Queue == queue && b.left[i] == 0 {
			b.spent = append(b.spent, spentMark{i, queue})
			return false
		}
	}
	return true
}

// Excluded returns the tenants whose work in queue cannot be claimed now
// (paused, or a limit of theirs spent), sorted. A claim of one tenant
// passes it as only, so that other tenants' spent limits neither exclude
// nor count as throttling it ("" = every tenant). A spent limit throttles
// the claim only if it held work back (SpentScopes, HeldBack).
func (b *ClaimBudget) Excluded(queue, only string) []string {
	var out []string
	for _, p := range b.paused {
		if p.Tenant != "" && p.Queue == queue && (only == "" || p.Tenant == only) {
			out = append(out, p.Tenant)
		}
	}
	for i, l := range b.limits {
		if l.Tenant != "" && (l.Queue == "" || l.Queue == queue) && b.left[i] == 0 && (only == "" || l.Tenant == only) {
			b.spent = append(b.spent, spentMark{i, queue})
			out = append(out, l.Tenant)
		}
	}
	sort.Strings(out)
	return out
}

// SpentScopes returns, once each, the scopes whose work the spent limits
// found by QueueOpen and Excluded kept this claim from: the skipped queue
// and the limit's tenant, or for a queue-wide limit only (the claim's
// tenant; "" = every tenant). Such a limit throttles the claim only when
// its scope holds a job the claim could otherwise have taken (of the
// queue, of the claim's kinds, due now): the store looks those up, only
// when there are any, and passes them to HeldBack before Usage and
// Report. A spent limit over an empty queue throttles nothing.
func (b *ClaimBudget) SpentScopes(only string) []FlowScope {
	if len(b.spent) == 0 {
		return nil
	}
	var out []FlowScope
	seen := map[FlowScope]bool{}
	for _, m := range b.spent {
		sc := b.spentScope(m, only)
		if !seen[sc] {
			seen[sc] = true
			out = append(out, sc)
		}
	}
	return out
}

// spentScope is the scope of SpentScopes of mark m.
func (b *ClaimBudget) spentScope(m spentMark, only string) FlowScope {
	tenant := b.limits[m.limit].Tenant
	if tenant == "" {
		tenant = only
	}
	return FlowScope{Tenant: tenant, Queue: m.queue}
}

// HeldBack counts as throttling the claim each spent limit of SpentScopes
// (given the same only) whose scope is among waiting: the scopes that hold
// a job the claim could otherwise have taken.
func (b *ClaimBudget) HeldBack(only string, waiting []FlowScope) {
	if len(waiting) == 0 {
		return
	}
	has := make(map[FlowScope]bool, len(waiting))
	for _, w := range waiting {
		has[w] = true
	}
	for _, m := range b.spent {
		if has[b.spentScope(m, only)] {
			b.hit[m.limit] = true
		}
	}
}

// Quota returns how many jobs of tenant in queue the claim may take, at
// most want, and reserves them from every limit that applies. The limits
// that lowered it count as having throttled the claim (ClaimRounds takes
// that back from a limit whose lowered quotas were not filled: it held
// nothing back), taken in the order given and then the tenant's inherited
// copies of default limits by queue scope (not in the order they were
// made, which depends on which windows a store holds rows of).
func (b *ClaimBudget) Quota(tenant, queue string, want int) int {
	n, _ := b.quota(tenant, queue, want)
	return n
}

// cutMark is a limit that lowered a quota, and whether it had throttled
// the claim before.
type cutMark struct {
	limit  int
	wasHit bool
}

// quota is Quota, which also returns the limits that lowered the quota.
func (b *ClaimBudget) quota(tenant, queue string, want int) (int, []cutMark) {
	b.ensure(tenant, queue, false)
	var cut []cutMark
	n := want
	// Own limits first, then the inherited copy of the every-queue
	// default, then that of the queue's (a tenant has at most these two).
	for pass := range 3 {
		b.each(tenant, queue, func(i int) {
			l := b.limits[i]
			if pass == 0 && l.inherited || pass == 1 && (!l.inherited || l.Queue != "") || pass == 2 && (!l.inherited || l.Queue == "") {
				return
			}
			if b.left[i] >= 0 && b.left[i] < n {
				n = b.left[i]
				cut = append(cut, cutMark{i, b.hit[i]})
				b.hit[i] = true
			}
		})
	}
	b.each(tenant, queue, func(i int) {
		if b.left[i] >= 0 {
			b.left[i] -= n
		}
	})
	return n, cut
}

// Return gives back n reserved but unclaimed jobs of tenant in queue.
func (b *ClaimBudget) Return(tenant, queue string, n int) {
	b.each(tenant, queue, func(i int) {
		if b.left[i] >= 0 {
			b.left[i] += n
		}
	})
}

// Claimed records that n jobs of tenant in queue were claimed.
func (b *ClaimBudget) Claimed(tenant, queue string, n int) {
	b.each(tenant, queue, func(i int) { b.used[i] += n })
}

// each calls f with the index of every limit that applies to work of
// tenant in queue, in the order of b.limits (which limits a quota marks
// as hit depends on it): the limits of every tenant and those of tenant,
// merged, so that a claim does not test every tenant's limits for each
// tenant it visits.
func (b *ClaimBudget) each(tenant, queue string, f func(i int)) {
	all, own := b.chain(""), -1
	if tenant != "" {
		own = b.chain(tenant)
	}
	for all >= 0 || own >= 0 {
		var i int
		if own < 0 || all >= 0 && all < own {
			i, all = all, b.next[all]
		} else {
			i, own = own, b.next[own]
		}
		if l := b.limits[i]; l.Queue == "" || l.Queue == queue {
			f(i)
		}
	}
}

// chain returns the first limit of tenant (-1 = none); b.next links the
// others.
func (b *ClaimBudget) chain(tenant string) int {
	if i, ok := b.first[tenant]; ok {
		return i
	}
	return -1
}

// link appends limit i, just added to b.limits, to the chain of its tenant.
func (b *ClaimBudget) link(i int) {
	b.next = append(b.next, -1)
	tenant := b.limits[i].Tenant
	j := b.chain(tenant)
	if j < 0 {
		b.first[tenant] = i
		return
	}
	for b.next[j] >= 0 {
		j = b.next[j]
	}
	b.next[j] = i
}

// LimitUsage is what a claim writes back to one limit row.
type LimitUsage struct {
	Scope       FlowScope
	WindowStart time.Time
	WindowUsed  int
	Throttled   int64 // to add
	// Inherited marks a tenant's window under the default limit of
	// Scope.Queue: the store upserts it into flow_default_windows.
	Inherited bool
}

// Usage returns the rows to write back: the rate windows that moved and the
// limits that throttled this claim.
func (b *ClaimBudget) Usage() []LimitUsage {
	var out []LimitUsage
	defaultHit := map[*Limit]bool{}
	for i, l := range b.limits {
		if (l.Rate == 0 || b.used[i] == 0) && !b.hit[i] {
			continue
		}
		u := LimitUsage{Scope: l.FlowScope, WindowStart: l.WindowStart, WindowUsed: l.WindowUsed, Inherited: l.inherited}
		if l.inherited && b.hit[i] {
			defaultHit[b.defaultOf(l)] = true
		}
		if l.Rate > 0 {
			ws := l.windowStart(b.now)
			if ws.After(l.WindowStart) {
				u.WindowStart, u.WindowUsed = ws, 0
			}
			u.WindowUsed += b.used[i]
		}
		if b.hit[i] {
			u.Throttled = 1
		}
		out = append(out, u)
	}
	// A default limit counts the claims that any tenant's copy throttled.
	for _, d := range b.defaults {
		if defaultHit[d] {
			out = append(out, LimitUsage{Scope: d.FlowScope, WindowStart: d.WindowStart, WindowUsed: d.WindowUsed, Throttled: 1})
		}
	}
	return out
}

// Report fills r (when not nil) from the limits that throttled this claim.
func (b *ClaimBudget) Report(r *ClaimReport) {
	if r == nil {
		return
	}
	*r = ClaimReport{}
	for i, l := range b.limits {
		if !b.hit[i] {
			continue
		}
		r.Throttled = true
		// Only a spent rate refills at its window's end: a limit at its
		// concurrency whose rate has room frees up when a job finishes.
		if l.Rate > 0 && b.left[i] == 0 && b.rateLeft(i) == 0 {
			end := l.windowStart(b.now).Add(l.Period)
			if r.NextRefill.IsZero() || end.Before(r.NextRefill) {
				r.NextRefill = end
			}
		}
	}
}

// rateLeft returns what is left of limit i's rate in the current window
// (l.Rate > 0), its concurrency aside: the rate's budget less what the
// claim took of the limit's.
func (b *ClaimBudget) rateLeft(i int) int {
	l := b.limits[i]
	rate := Limit{Rate: l.Rate, Period: l.Period, WindowStart: l.WindowStart, WindowUsed: l.WindowUsed}
	return max(0, rate.budget(b.now)-(l.budget(b.now)-b.left[i]))
}

// SetWeights gives the budget the weighted scopes (Limit.Weight > 0).
func (b *ClaimBudget) SetWeights(ws []*Limit) { b.weights = ws }

// Shares returns each tenant's share of a claim of limit jobs from queue:
// ceil(limit × weight / sum of weights), weight 1 unless set.
func (b *ClaimBudget) Shares(queue string, tenants []string, limit int) []int {
	w := make([]int, len(tenants))
	sum := 0
	for i, t := range tenants {
		w[i] = TenantWeight(b.weights, t, queue)
		sum += w[i]
	}
	out := make([]int, len(tenants))
	for i := range tenants {
		out[i] = (limit*w[i] + sum - 1) / sum
	}
	return out
}

// TenantWeight returns tenant's weight in queue among the weighted scopes
// ws: that of the most specific scope naming the tenant ((tenant, queue)
// over tenant), 1 when none does.
func TenantWeight(ws []*Limit, tenant, queue string) int {
	w, best := 1, -1
	for _, l := range ws {
		if l.Tenant == tenant && (l.Queue == "" || l.Queue == queue) {
			if spec := len(l.Queue); spec > best {
				best, w = spec, l.Weight
			}
		}
	}
	return w
}

// HasLimits reports whether any limit applies (a claim without limits need
// not lock or write flow-control rows).
func (b *ClaimBudget) HasLimits() bool { return len(b.limits)+len(b.defaults) > 0 }

// HasConcurrency reports whether any limit counts running jobs.
func HasConcurrency(limits []*Limit) bool {
	for _, l := range limits {
		if l.Concurrency > 0 {
			return true
		}
	}
	return false
}

// RunningCount is the number of running jobs of one (tenant, queue).
type RunningCount struct {
	Tenant, Queue string
	N             int
}

// SetRunning fills each limit's Running from the running counts.
func SetRunning(limits []*Limit, counts []RunningCount) {
	for _, l := range limits {
		l.Running = 0
		for _, c := range counts {
			if l.applies(c.Tenant, c.Queue) {
				l.Running += c.N
			}
		}
	}
}

// ClaimTenants returns the tenants a claim visits this round: up to limit
// tenants with claimable work, starting after the cursor and wrapping
// around. next lists, in order, at most k tenants t with claimable work,
// t > after and (upTo == "" or t <= upTo), skipping excluded ones; it is
// the store's index probe. Tenant names are never empty.
func ClaimTenants(cursor string, limit int, next func(after, upTo string, k int) ([]string, error)) ([]string, error) {
	ts, err := next(cursor, "", limit)
	if err != nil {
		return nil, fmt.Errorf("list tenants: %w", err)
	}
	if len(ts) < limit && cursor != "" {
		more, err := next("", cursor, limit-len(ts))
		if err != nil {
			return nil, fmt.Errorf("list tenants: %w", err)
		}
		for _, t := range more {
			if len(ts) == 0 || t != ts[0] {
				ts = append(ts, t)
			}
		}
	}
	return ts, nil
}

// ClaimCursors remembers, per queue, the last tenant a claim visited, so the
// next claim starts after it. The zero value is ready; it is safe for
// concurrent use.
type ClaimCursors struct {
	mu sync.Mutex
	m  map[string]string
}

// Get returns the cursor of queue ("" = from the first tenant).
func (c *ClaimCursors) Get(queue string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[queue]
}

// Set moves the cursor of queue to tenant.
func (c *ClaimCursors) Set(queue, tenant string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]string{}
	}
	c.m[queue] = tenant
}

// CurrentWindows moves each rate limit's window to the one holding now (a
// window that has passed counts nothing), for reports.
func CurrentWindows(limits []*Limit, now time.Time) {
	for _, l := range limits {
		if l.Rate == 0 {
			continue
		}
		if ws := l.windowStart(now); !ws.Equal(l.WindowStart) {
			l.WindowStart, l.WindowUsed = ws, 0
		}
	}
}

// SortLimits orders limits by (Tenant, Queue), as LimitList returns them.
func SortLimits(ls []*Limit) {
	sort.SliceStable(ls, func(i, j int) bool {
		if ls[i].Tenant != ls[j].Tenant {
			return ls[i].Tenant < ls[j].Tenant
		}
		return ls[i].Queue < ls[j].Queue
	})
}

// SortScopes orders scopes by (Queue, Tenant).
func SortScopes(s []FlowScope) {
	sort.Slice(s, func(i, j int) bool {
		if s[i].Queue != s[j].Queue {
			return s[i].Queue < s[j].Queue
		}
		return s[i].Tenant < s[j].Tenant
	})
}

// ClaimRounds claims up to limit jobs of queue among tenants (in visit
// order) within budget b: each tenant's fair share (Shares, capped by
// Quota), then what is left among the tenants that got all of their share
// and those the round gave none (cut by the budget or the claim's limit),
// until the claim is full or a round has no tenant to give a share. claim takes up to
// ns[i] jobs of ts[i] in one statement. Both stores' fair claims are this
// loop around their own claim statement.
func ClaimRounds(b *ClaimBudget, queue string, limit int, tenants []string,
	claim func(ts []string, ns []int) ([]*idemtype.JobRow, error)) ([]*idemtype.JobRow, error) {
	out, _, err := ClaimRoundsTurns(b, queue, limit, tenants, claim)
	return out, err
}

// ClaimRoundsTurns is ClaimRounds that also returns the tenants whose turn
// the claim took: the visit list up to the first tenant whose first-round
// share was cut to nothing, excluded: by the budget (a queue-wide limit
// spent by the tenants before it) or by the claim's own limit (shares are
// rounded up, so with claims of 4 among 3 tenants the third gets none).
// The rotation's cursor moves to the last of them (nil: it stays), so that
// a tenant left out is visited first by the next claim: moving past it let
// the tenants listed before it take every freed slot of a queue at its
// concurrency (or every claim), and the tenant listed last never ran.
// Without such a cut it is the whole visit list.
func ClaimRoundsTurns(b *ClaimBudget, queue string, limit int, tenants []string,
	claim func(ts []string, ns []int) ([]*idemtype.JobRow, error)) (out []*idemtype.JobRow, turns []string, err error) {
	turns = tenants
	for first := true; len(tenants) > 0 && len(out) < limit; first = false {
		shares := b.Shares(queue, tenants, limit-len(out))
		var ts []string
		var ns, wants []int
		// The limits that lowered a quota this round, and whether they
		// held work back: a limit that throttled the claim before, or cut
		// a tenant to nothing or to a quota it filled. One that only cut
		// tenants short of a quota they did not fill held nothing back (a
		// tenant with one job under a rate with 3 left, asked for 10).
		var cuts [][]cutMark
		var held map[int]bool
		granted := make([]bool, len(tenants))
		left := limit - len(out)
		for i, tenant := range tenants {
			want := min(shares[i], left)
			if want == 0 {
				// The claim's own limit left it out: its turn is not
				// taken either (passing it starved the third of three
				// tenants under claims of four).
				if first && len(turns) == len(tenants) {
					turns = tenants[:i:i]
				}
				break
			}
			n, cut := b.quota(tenant, queue, want)
			if len(cut) > 0 && held == nil {
				held = map[int]bool{}
			}
			for _, c := range cut {
				if _, seen := held[c.limit]; !seen {
					held[c.limit] = c.wasHit
				}
				if n == 0 {
					held[c.limit] = true
				}
			}
			if n > 0 {
				ts, ns, wants = append(ts, tenant), append(ns, n), append(wants, want)
				cuts = append(cuts, cut)
				granted[i] = true
				left -= n
			} else if first && len(turns) == len(tenants) {
				turns = tenants[:i:i]
			}
		}
		if len(ts) == 0 {
			break
		}
		jobs, err := claim(ts, ns)
		if err != nil {
			return nil, nil, err
		}
		got := map[string]int{}
		for _, j := range jobs {
			got[j.Tenant]++
		}
		filled := map[string]bool{}
		for i, tenant := range ts {
			b.Return(tenant, queue, ns[i]-got[tenant])
			b.Claimed(tenant, queue, got[tenant])
			if got[tenant] == wants[i] {
				filled[tenant] = true
			}
			if got[tenant] >= ns[i] {
				for _, c := range cuts[i] {
					held[c.limit] = true
				}
			}
		}
		for l, h := range held {
			if !h {
				b.hit[l] = false
			}
		}
		out = append(out, jobs...)
		// The next round: the tenants that filled their share and those
		// this round gave none (what others left unclaimed may be theirs:
		// a tenant visited first with nothing claimable left a claim
		// under a queue limit empty). A round that claims nothing drops
		// the tenants it gave a share, so the rounds end.
		next := tenants[:0:0]
		for i, tenant := range tenants {
			if filled[tenant] || !granted[i] {
				next = append(next, tenant)
			}
		}
		tenants = next
	}
	if len(turns) == 0 {
		turns = nil
	}
	return out, turns, nil
}
