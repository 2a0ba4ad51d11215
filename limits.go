package idem

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// Limit caps the work of a scope (a tenant, a queue, or one tenant's work in
// one queue): a rate (Rate jobs started per Period) and/or a concurrency
// (Concurrency jobs running at once). Limits are stored in the database and
// enforced at claim time by every process sharing the store; throttled jobs
// stay available and use no attempt. See docs/flow-control.md.
type Limit = store.Limit

// EveryTenant ("*") as a limit's tenant makes it the default limit of every
// tenant that has no limit of its own for the same queue scope, each tenant
// with its own budget (its own rate window, its own running count). It is
// reserved: no job, schedule or client has it as its tenant.
const EveryTenant = store.EveryTenant

// MaxWeight is the largest tenant weight (Limit.Weight).
const MaxWeight = store.MaxWeight

// FlowScope names a scope of limits and pauses: Tenant "" means every
// tenant together, Queue "" every queue together.
type FlowScope = store.FlowScope

// LimitPut creates or replaces the limit of l's scope and returns it as
// kept: the rate's period in whole microseconds (cut to them).
func (c *Client) LimitPut(ctx context.Context, l Limit) (*Limit, error) {
	return c.store.LimitPut(ctx, &store.LimitPutParams{Limit: l, Now: c.now()})
}

// LimitList returns the limits naming tenant ("" = every limit) with their
// current usage (running jobs, jobs started in the current rate window,
// throttled claims).
func (c *Client) LimitList(ctx context.Context, tenant string) ([]*Limit, error) {
	return c.store.LimitList(ctx, &store.LimitListParams{Tenant: tenant, Now: c.now()})
}

// LimitDelete removes the limit of scope; ErrNotFound if it has none.
func (c *Client) LimitDelete(ctx context.Context, scope FlowScope) error {
	return c.store.LimitDelete(ctx, &store.LimitDeleteParams{Scope: scope})
}

// QueuePause stops claims of queue (tenant "") or of tenant's work in queue
// on every node sharing the store. Paused jobs stay available and running
// jobs finish.
func (c *Client) QueuePause(ctx context.Context, queue, tenant string) error {
	return c.store.QueuePause(ctx, &store.QueuePauseParams{Scope: FlowScope{Tenant: tenant, Queue: queue}})
}

// QueueResume undoes QueuePause and wakes this process's producer of queue;
// other nodes claim at their next poll.
func (c *Client) QueueResume(ctx context.Context, queue, tenant string) error {
	err := c.store.QueueResume(ctx, &store.QueuePauseParams{Scope: FlowScope{Tenant: tenant, Queue: queue}})
	if err == nil {
		c.wake(queue)
	}
	return err
}

// QueuePauseList returns the paused scopes.
func (c *Client) QueuePauseList(ctx context.Context) ([]FlowScope, error) {
	return c.store.QueuePauseList(ctx)
}

// applyLimits stores the limits of Config.Limits.
func (c *Client) applyLimits(ctx context.Context) error {
	for _, l := range c.cfg.Limits {
		if _, err := c.LimitPut(ctx, l); err != nil {
			return fmt.Errorf("limit %s/%s: %w", l.Tenant, l.Queue, err)
		}
	}
	return nil
}

// ParseRate parses a rate "N/period" ("100/1m", "5/1s", "1000/m": a bare
// unit means 1 of it); errors are *idemtype.InvalidError for field "rate".
func ParseRate(s string) (n int, period time.Duration, err error) {
	num, per, ok := strings.Cut(s, "/")
	if !ok {
		return 0, 0, idemtype.Invalid("rate", "want N/period, e.g. 100/1m")
	}
	n, err = strconv.Atoi(num)
	if err != nil || n < 1 {
		return 0, 0, idemtype.Invalid("rate", "N must be a positive integer")
	}
	given := per
	if per != "" && (per[0] >= 'a' && per[0] <= 'z' || per[0] >= 'A' && per[0] <= 'Z') {
		per = "1" + per // a bare unit; not before '.' (".5s" is half a second)
	}
	period, err = time.ParseDuration(per)
	switch {
	case err != nil && per != "" && strings.Trim(per, "0123456789.+-") == "":
		return 0, 0, idemtype.Invalid("rate", "period %q has no unit: want a number and a unit (ms, s, m or h), e.g. 1.5s", given)
	case err != nil:
		return 0, 0, idemtype.Invalid("rate", "period %q is not a duration: want a number and a unit (ms, s, m or h), e.g. 1m", given)
	case period < time.Millisecond:
		return 0, 0, idemtype.Invalid("rate", "period %v is below 1ms: the period must be a duration of at least 1ms, e.g. 1m", period)
	}
	return n, period, nil
}

// FormatRate formats a rate as ParseRate reads it ("" for no rate).
func FormatRate(n int, period time.Duration) string {
	if n == 0 {
		return ""
	}
	p := period.String()
	switch {
	case period%time.Hour == 0:
		p = strconv.FormatInt(int64(period/time.Hour), 10) + "h"
	case period%time.Minute == 0:
		p = strconv.FormatInt(int64(period/time.Minute), 10) + "m"
	}
	return strconv.Itoa(n) + "/" + p
}
