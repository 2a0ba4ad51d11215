package idem

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/quantile"
	"github.com/idem-dev/idem/store"
)

// Defaults of TargetStats.
const (
	// DefaultTargetStatsWindow is how far back TargetStats looks.
	DefaultTargetStatsWindow = time.Hour
	// DefaultTargetStatsSample caps the attempts TargetStats reads.
	DefaultTargetStatsSample = 10000
)

// TargetStat summarises the recent attempts of one delivery target.
type TargetStat struct {
	// Tenant owns the target: targets are per tenant, so two tenants may
	// each have a target named Target.
	Tenant    string
	Target    string
	Attempts  int // attempts in the window
	Completed int // answered 2xx
	Retried   int // failed, to be retried (429, 5xx, timeouts, connection errors)
	Dead      int // failed for good (410, other 4xx)
	// SuccessRate is Completed / (Completed + Retried + Dead).
	SuccessRate float64
	// Latency percentiles of the attempts' durations.
	P50, P95, P99 time.Duration
	// Statuses counts the attempts by HTTP status (0: no response).
	Statuses map[int]int
}

// TargetStatsOpts scopes TargetStats; nil means every default.
type TargetStatsOpts struct {
	Tenant string // "" = the default tenant
	// AllTenants reads the targets of every tenant (Tenant is ignored).
	AllTenants bool
	Window     time.Duration // default DefaultTargetStatsWindow
	Sample     int           // default DefaultTargetStatsSample
}

// TargetStats returns, per target (a tenant's target name), the success
// rate and latency percentiles of its attempts in the window (the newest
// Sample attempts), ordered by tenant and target name.
func (c *Client) TargetStats(ctx context.Context, opts *TargetStatsOpts) ([]*TargetStat, error) {
	var o TargetStatsOpts
	if opts != nil {
		o = *opts
	}
	setDefault(&o.Window, DefaultTargetStatsWindow)
	setDefault(&o.Sample, DefaultTargetStatsSample)
	tenant := c.tenant(o.Tenant)
	if o.AllTenants {
		tenant = ""
	}
	atts, err := c.store.AttemptDeliveryList(ctx, &store.AttemptDeliveryListParams{
		Tenant: tenant, Since: c.now().Add(-o.Window), Limit: o.Sample})
	if err != nil {
		return nil, fmt.Errorf("target stats: %w", err)
	}
	type target struct{ tenant, name string }
	by := map[target]*TargetStat{}
	lat := map[target][]time.Duration{}
	for _, a := range atts {
		if a.Outcome == idemtype.OutcomeSnoozed {
			continue // never sent: the target was at its concurrency cap
		}
		k := target{a.Tenant, a.Target}
		s := by[k]
		if s == nil {
			s = &TargetStat{Tenant: a.Tenant, Target: a.Target, Statuses: map[int]int{}}
			by[k] = s
		}
		s.Attempts++
		s.Statuses[a.HTTPStatus]++
		switch a.Outcome {
		case idemtype.OutcomeCompleted:
			s.Completed++
		case idemtype.OutcomeDead:
			s.Dead++
		default:
			s.Retried++
		}
		lat[k] = append(lat[k], time.Duration(a.DurationMS)*time.Millisecond)
	}
	out := make([]*TargetStat, 0, len(by))
	for k, s := range by {
		s.SuccessRate = float64(s.Completed) / float64(s.Attempts)
		s.P50, s.P95, s.P99 = quantile.P50P95P99(lat[k])
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *TargetStat) int {
		return cmp.Or(strings.Compare(a.Tenant, b.Tenant), strings.Compare(a.Target, b.Target))
	})
	return out, nil
}
