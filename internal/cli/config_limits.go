package cli

import (
	"fmt"

	"github.com/idem-dev/idem"
)

// LimitsConfig is the [limits] section of `idem serve`: flow-control
// limits stored when the server starts (idem.Config.Limits), replacing
// the limits of the same scopes. Limits set with `idem limits` or the API
// live in the database besides; a limit removed from here is not deleted.
// Seed 002's QUEUE_MAX_JOBS_PER_TENANT=100 is IDEM_LIMITS_TENANT_RATE=100/1m,
// its QUEUE_MAX_JOBS_PER_QUEUE=1000 a [limits.queues] entry per queue.
type LimitsConfig struct {
	// TenantRate is the default rate of every tenant (tenant "*": each
	// tenant its own budget), as "N/period" ("100/1m"); "" sets none.
	TenantRate string `koanf:"tenant_rate" toml:"tenant_rate"`
	// TenantConcurrency is the default concurrency of every tenant; 0
	// sets none.
	TenantConcurrency int `koanf:"tenant_concurrency" toml:"tenant_concurrency"`
	// Queues maps a queue to its rate ("1000/1m"), all tenants together
	// (file only).
	Queues map[string]string `koanf:"queues" toml:"queues,omitempty"`
}

// validate checks the rates and the concurrency, naming their keys:
// each must parse and be a limit idem.NewClient takes (Limit.Validate:
// counts fit the stores' 32-bit integers).
func (l LimitsConfig) validate() []error {
	var errs []error
	if l.TenantRate != "" {
		if err := checkRate(l.TenantRate); err != nil {
			errs = append(errs, fmt.Errorf("limits.tenant_rate %q: %w", l.TenantRate, err))
		}
	}
	if c := l.TenantConcurrency; c != 0 {
		lim := idem.Limit{FlowScope: idem.FlowScope{Tenant: idem.EveryTenant}, Concurrency: c}
		if err := lim.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("limits.tenant_concurrency %d (0 = none): %w", c, err))
		}
	}
	for _, q := range sortedKeys(l.Queues) {
		if err := checkRate(l.Queues[q]); err != nil {
			errs = append(errs, fmt.Errorf("limits.queues.%s %q: %w", q, l.Queues[q], err))
			continue
		}
		if err := idem.ValidateName("queue", q); err != nil {
			errs = append(errs, fmt.Errorf("limits.queues.%s: %w", q, err))
		}
	}
	return errs
}

// checkRate checks a rate ("100/1m") as a limit's: it parses, and its
// count is one Limit.Validate takes.
func checkRate(s string) error {
	n, period, err := idem.ParseRate(s)
	if err != nil {
		return err
	}
	l := idem.Limit{FlowScope: idem.FlowScope{Queue: "q"}, Rate: n, Period: period}
	return l.Validate()
}

// limits is the idem.Config.Limits of l (validated): the default limit of
// every tenant, then one limit per queue in name order.
func (l LimitsConfig) limits() []idem.Limit {
	var out []idem.Limit
	if l.TenantRate != "" || l.TenantConcurrency > 0 {
		d := idem.Limit{FlowScope: idem.FlowScope{Tenant: idem.EveryTenant}, Concurrency: l.TenantConcurrency}
		if l.TenantRate != "" {
			d.Rate, d.Period, _ = idem.ParseRate(l.TenantRate)
		}
		out = append(out, d)
	}
	for _, q := range sortedKeys(l.Queues) {
		n, period, _ := idem.ParseRate(l.Queues[q])
		out = append(out, idem.Limit{FlowScope: idem.FlowScope{Queue: q}, Rate: n, Period: period})
	}
	return out
}
