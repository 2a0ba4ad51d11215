package store

import (
	"time"

	"github.com/idem-dev/idem/idemtype"
)

// EveryTenant is the tenant of a default limit's scope: a limit of
// FlowScope{Tenant: EveryTenant, Queue: q} applies to every tenant that
// has no limit of its own for queue scope q, each tenant with its own
// budget (its own rate window and its own running count). It is reserved:
// no job has it as its tenant (CheckInsertTenants).
const EveryTenant = "*"

// IsDefault reports whether the scope is a default for every tenant
// (Tenant is EveryTenant).
func (s FlowScope) IsDefault() bool { return s.Tenant == EveryTenant }

// CheckInsertTenants reports an *idemtype.InvalidError for field "tenant"
// when a job would have the reserved tenant EveryTenant. Both stores
// call it before storing anything, so a batch naming it stores nothing.
func CheckInsertTenants(jobs []*JobInsertParams) error {
	for _, j := range jobs {
		if j != nil && j.Tenant == EveryTenant {
			return idemtype.Invalid("tenant", "%q is reserved for default limits", EveryTenant)
		}
	}
	return nil
}

// InheritedWindow is one tenant's rate window under a default limit: the
// default of queue scope Queue ("" = every queue), as the stores keep it in
// flow_default_windows.
type InheritedWindow struct {
	Tenant      string
	Queue       string
	WindowStart time.Time
	WindowUsed  int
	Throttled   int64
}

// inherit returns tenant's copy of the default limit d, with its own
// window (from b.window) and running count.
func (b *ClaimBudget) inherit(d *Limit, tenant string) *Limit {
	l := &Limit{FlowScope: FlowScope{Tenant: tenant, Queue: d.Queue}, Rate: d.Rate, Period: d.Period,
		Concurrency: d.Concurrency, inherited: true}
	if b.window != nil {
		if w, ok := b.window(l.FlowScope); ok {
			l.WindowStart, l.WindowUsed = w.WindowStart, w.WindowUsed
		}
	}
	for _, c := range b.running[tenant] {
		if d.Queue == "" || c.Queue == d.Queue {
			l.Running += c.N
		}
	}
	return l
}

// ownLimit reports whether tenant has a limit of its own (or an inherited
// copy already made) for queue scope queue.
func (b *ClaimBudget) ownLimit(tenant, queue string) bool {
	return b.has[FlowScope{Tenant: tenant, Queue: queue}]
}

// SetInherited gives the budget the tenants' windows under its default
// limits (read after the default rows were locked) and the running counts
// of every (tenant, queue), and makes the inherited limits of the tenants
// whose window is spent and of every tenant with running jobs, so that
// Excluded sees the tenants whose inherited budget is spent. Other tenants
// get theirs (from these windows) when first asked for a quota: with
// thousands of tenants under a default, a claim makes the few it visits.
func (b *ClaimBudget) SetInherited(windows []InheritedWindow, running []RunningCount) {
	b.SetInheritedLookup(LookupWindows(windows), windows, running)
}

// LookupWindows returns a WindowLookup of windows.
func LookupWindows(windows []InheritedWindow) WindowLookup {
	byScope := make(map[FlowScope]InheritedWindow, len(windows))
	for _, w := range windows {
		byScope[FlowScope{Tenant: w.Tenant, Queue: w.Queue}] = w
	}
	return func(scope FlowScope) (InheritedWindow, bool) {
		w, ok := byScope[scope]
		return w, ok
	}
}

// WindowLookup returns a tenant's current window under the default limit
// of a queue scope (scope is the tenant and that queue scope), as
// SetInherited's windows hold it, and whether it has one.
type WindowLookup func(scope FlowScope) (InheritedWindow, bool)

// SetInheritedLookup is SetInherited for a store that keeps the tenants'
// windows itself (SQLite's flow cache): window finds one, and spent are at
// least the windows that leave nothing of their default's rate now (each
// is checked again; their order does not matter, see Quota). With
// thousands of tenants under a default, building SetInherited's map was
// most of a claim.
func (b *ClaimBudget) SetInheritedLookup(window WindowLookup, spent []InheritedWindow, running []RunningCount) {
	b.window = window
	b.running = map[string][]RunningCount{}
	for _, c := range running {
		b.running[c.Tenant] = append(b.running[c.Tenant], c)
	}
	for _, w := range spent {
		if b.spentWindow(w) {
			b.ensure(w.Tenant, w.Queue, true)
		}
	}
	for _, c := range running {
		b.ensure(c.Tenant, c.Queue, false)
	}
}

// spentWindow reports whether w leaves nothing of its default's rate in
// the current window.
func (b *ClaimBudget) spentWindow(w InheritedWindow) bool {
	for _, d := range b.defaults {
		if d.Queue == w.Queue && d.Rate > 0 && w.WindowStart.Equal(d.windowStart(b.now)) && w.WindowUsed >= d.Rate {
			return true
		}
	}
	return false
}

// HasDefaults reports whether a default limit applies to the claim (the
// store must then load the inherited windows and the running counts).
func (b *ClaimBudget) HasDefaults() bool { return len(b.defaults) > 0 }

// ensure makes tenant's inherited limits for work in queue (exact: only
// the default of queue scope queue; else every default covering queue).
func (b *ClaimBudget) ensure(tenant, queue string, exact bool) {
	if tenant == EveryTenant {
		return
	}
	for _, d := range b.defaults {
		if exact && d.Queue != queue || !exact && d.Queue != "" && d.Queue != queue {
			continue
		}
		if b.ownLimit(tenant, d.Queue) {
			continue
		}
		l := b.inherit(d, tenant)
		b.has[l.FlowScope] = true
		b.limits = append(b.limits, l)
		b.link(len(b.limits) - 1)
		b.left = append(b.left, l.budget(b.now))
		b.used = append(b.used, 0)
		b.hit = append(b.hit, false)
	}
}

// splitDefaults moves the default limits out of limits: they apply through
// each tenant's inherited copy, never by themselves.
func splitDefaults(limits []*Limit) (own, defaults []*Limit) {
	for _, l := range limits {
		if l.IsDefault() {
			defaults = append(defaults, l)
		} else {
			own = append(own, l)
		}
	}
	return own, defaults
}

// defaultOf returns the default limit an inherited one comes from.
func (b *ClaimBudget) defaultOf(l *Limit) *Limit {
	for _, d := range b.defaults {
		if d.Queue == l.Queue {
			return d
		}
	}
	return nil
}

// DefaultUsage returns, for LimitList of one tenant, the default limits of
// limits that apply to tenant (no limit of its own for the queue scope),
// each with tenant's usage: its running jobs and its window. windows are
// tenant's inherited windows.
func DefaultUsage(limits []*Limit, tenant string, windows []InheritedWindow, running []RunningCount, now time.Time) []*Limit {
	var out []*Limit
	for _, d := range limits {
		if !d.IsDefault() || !d.Limited() {
			continue
		}
		own := false
		for _, l := range limits {
			if l.Tenant == tenant && l.Queue == d.Queue && l.Limited() {
				own = true
			}
		}
		if own {
			continue
		}
		u := *d
		u.Running, u.WindowStart, u.WindowUsed, u.Throttled = 0, time.Time{}, 0, 0
		for _, w := range windows {
			if w.Tenant == tenant && w.Queue == d.Queue {
				u.WindowStart, u.WindowUsed, u.Throttled = w.WindowStart, w.WindowUsed, w.Throttled
			}
		}
		for _, c := range running {
			if c.Tenant == tenant && (d.Queue == "" || c.Queue == d.Queue) {
				u.Running += c.N
			}
		}
		out = append(out, &u)
	}
	CurrentWindows(out, now)
	return out
}
