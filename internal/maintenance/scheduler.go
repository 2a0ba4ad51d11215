package maintenance

import (
	"context"
	"fmt"
	"time"

	"github.com/idem-dev/idem/store"
)

// Defaults of the scheduler.
const (
	// DefaultScheduleInterval is how often the scheduler looks for due firings.
	DefaultScheduleInterval = time.Second
	// DefaultScheduleGrace is how late a firing may still run under the
	// skip policy: later than this after its time, it counts as missed.
	DefaultScheduleGrace = time.Minute
	// maxFiringScan bounds the firings one run steps through per schedule
	// to count the missed ones (a schedule idle for years, firing every
	// second); past it the newest due firing is found by bisection.
	maxFiringScan = 100_000
)

// Firing is one firing of a schedule, handed to FireFunc.
type Firing struct {
	Schedule *store.Schedule
	Plan     *Plan
	At       time.Time // the firing time (UTC)
	Missed   int       // older firings not run (skipped or caught up by this one); a lower bound past 100,000
}

// FireFunc enqueues the job of one firing and records the firing, both in
// one store.Schedules.ScheduleFire, so only while f.Schedule is still the
// stored definition and f.At is after the schedule's stored mark. It
// reports false when it is not (the schedule was deleted or changed since
// the scheduler read it, or another scheduler — a new leader while this
// one stalled — fired or skipped f.At or a later firing): nothing was
// written, and the next run reads the schedule afresh. It must be
// idempotent: the firing key decides, through the store's unique
// constraint on idempotency keys.
type FireFunc func(ctx context.Context, f *Firing) (fired bool, err error)

// PlanFunc decodes a stored schedule's timing.
type PlanFunc func(s *store.Schedule) (*Plan, error)

// Scheduler enqueues the firings of the stored schedules. It runs on the
// leader, but correctness never depends on that: a firing is one job because
// its idempotency key ({schedule}:{tenant}:{grain date}) is unique, so ten
// schedulers at once, a restart or a clock step make no second job. The
// stored LastFiredAt (forward only) saves the repeated inserts and tells the
// missed firings apart, and it is checked on every firing: a firing is
// enqueued and recorded only while its schedule is the definition it was
// computed from and the firing is after the stored mark (store
// ScheduleFire), so a schedule deleted or replaced during a run never fires
// with the old one, and a stale leader never fires a slot at or before one
// another scheduler fired or skipped.
type Scheduler struct {
	store store.Schedules
	cfg   Config
	fire  FireFunc
	plan  PlanFunc
	loop
}

// NewScheduler returns a scheduler; cfg may be nil (Interval defaults to
// DefaultScheduleInterval, ScheduleGrace to DefaultScheduleGrace).
func NewScheduler(st store.Schedules, cfg *Config, plan PlanFunc, fire FireFunc) *Scheduler {
	s := &Scheduler{store: st, cfg: cfg.withDefaults(DefaultScheduleInterval), fire: fire, plan: plan}
	s.cfg.ScheduleGrace = orDefault(s.cfg.ScheduleGrace, DefaultScheduleGrace)
	s.loop = loop{name: "scheduler", interval: s.cfg.Interval, logger: s.cfg.Logger, gate: s.cfg.IsLeader, fn: s.RunOnce, onRun: s.cfg.OnRun}
	return s
}

// RunOnce enqueues every due firing and returns how many it enqueued or
// found enqueued. A schedule that fails is logged and the others go on.
func (s *Scheduler) RunOnce(ctx context.Context) (int, error) {
	list, err := s.store.ScheduleList(ctx, &store.ScheduleListParams{})
	if err != nil {
		return 0, fmt.Errorf("scheduler: %w", err)
	}
	n := 0
	for _, sc := range list {
		fired, err := s.runSchedule(ctx, sc)
		if err != nil {
			if ctx.Err() != nil {
				return n, ctx.Err()
			}
			s.cfg.Logger.Warn("schedule failed", "tenant", sc.Tenant, "schedule", sc.Name, "err", err)
			continue
		}
		if fired {
			n++
		}
	}
	return n, nil
}

// runSchedule handles one schedule: the newest due firing runs (the older
// ones are missed); under the skip policy it runs only within the grace.
// It reports whether a firing was enqueued. The clock is read here, for
// this schedule, not once per pass: a node paused during a pass (longer
// than the grace) must judge the schedules after the pause on the time
// they are fired at, or the skip policy would run a firing late.
func (s *Scheduler) runSchedule(ctx context.Context, sc *store.Schedule) (bool, error) {
	plan, err := s.plan(sc)
	if err != nil {
		return false, err
	}
	now := s.cfg.Now().UTC()
	anchor := sc.CreatedAt
	if sc.LastFiredAt != nil {
		anchor = *sc.LastFiredAt
	}
	last, due := LatestDue(plan, anchor, now)
	if due == 0 {
		return false, nil // nothing due; also a clock stepped back before the last firing
	}
	f := &Firing{Schedule: sc, Plan: plan, At: last, Missed: due - 1}
	if plan.Missed() == MissedSkip && now.Sub(last) > s.cfg.ScheduleGrace {
		s.cfg.Logger.Info("schedule firings missed", "tenant", sc.Tenant, "schedule", sc.Name, "missed", due, "last", last)
		res, err := s.store.ScheduleFire(ctx, &store.ScheduleFireParams{Read: sc, At: last, Now: now})
		if err != nil {
			return false, fmt.Errorf("skip %s: %w", last.Format(time.RFC3339), err)
		}
		if res.Stale {
			s.cfg.Logger.Debug("schedule changed or fired elsewhere during the run", "tenant", sc.Tenant, "schedule", sc.Name)
		}
		return false, nil
	}
	fired, err := s.fire(ctx, f)
	if err != nil {
		return false, fmt.Errorf("fire %s: %w", last.Format(time.RFC3339), err)
	}
	if !fired {
		s.cfg.Logger.Debug("schedule changed or fired elsewhere during the run", "tenant", sc.Tenant, "schedule", sc.Name)
		return false, nil
	}
	if f.Missed > 0 {
		s.cfg.Logger.Info("schedule caught up", "tenant", sc.Tenant, "schedule", sc.Name, "missed", f.Missed, "at", last)
	}
	return true, nil
}

// LatestDue returns the newest firing in (after, now] and how many firings
// fell in that span (0: none, and last is zero). The count is exact up to
// maxFiringScan and that bound past it (a lower bound): a schedule idle for
// longer (two years at one firing a minute) still gets its newest firing,
// found by bisection rather than by stepping through every firing.
func LatestDue(p *Plan, after, now time.Time) (last time.Time, count int) {
	if p.cron == nil {
		if !now.After(after) {
			return time.Time{}, 0
		}
		last = now.Truncate(p.every)
		if !last.After(after) {
			return time.Time{}, 0
		}
		first := p.Next(after)
		return last.UTC(), int(last.Sub(first)/p.every) + 1
	}
	for f := p.Next(after); !f.IsZero() && !f.After(now); f = p.Next(f) {
		last, count = f, count+1
		if count >= maxFiringScan {
			return latestFrom(p, f, now), count
		}
	}
	return last, count
}

// latestFrom returns the newest firing in [f, now], f being a firing at or
// before now. Next (the first firing strictly after t) is monotone in t, so
// a bisection finds the latest lo with Next(lo) <= now (then Next(lo+1ns)
// is after now, so Next(lo) is the newest firing) in about 60 calls of Next
// whatever the span.
func latestFrom(p *Plan, f, now time.Time) time.Time {
	due := func(t time.Time) bool { n := p.Next(t); return !n.IsZero() && !n.After(now) }
	if !due(f) {
		return f
	}
	lo, hi := f, now // due(lo), !due(hi): Next(now) is after now
	for hi.Sub(lo) > time.Nanosecond {
		mid := lo.Add(hi.Sub(lo) / 2)
		if due(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return p.Next(lo)
}
