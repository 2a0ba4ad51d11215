package idem

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/maintenance"
	"github.com/idem-dev/idem/key"
	"github.com/idem-dev/idem/store"
)

// Missed-firing policies of a Schedule.
const (
	// MissedSkip (the default) drops firings that fell due while no
	// scheduler ran; a firing found more than a minute late is missed.
	MissedSkip = maintenance.MissedSkip
	// MissedCatchUp runs one job for the newest missed firing, then goes on.
	MissedCatchUp = maintenance.MissedCatchUp
)

// ScheduleKeyPrefix starts the idempotency key of every schedule firing:
// "§" + "{schedule}:{tenant}:{grain date}" (key.Lock). User keys are
// printable ASCII, so they can never produce it, and a firing never meets
// a user's job key.
const ScheduleKeyPrefix = "§"

// Schedule is a job enqueued on a timetable: a cron expression (5 fields,
// or 6 with leading seconds) or a fixed interval, in a time zone. Each
// firing is one job, keyed "{Name}:{Tenant}:{grain date}" so that it is
// created once whatever the number of schedulers, restarts or clock steps.
type Schedule struct {
	// Name identifies the schedule in its tenant: printable ASCII, no
	// spaces and no ':'.
	Name   string
	Tenant string // default Config.Tenant

	Cron     string        // cron expression; or Every
	Every    time.Duration // fixed interval (≥ 1 m, whole seconds), aligned to the UTC clock
	Timezone string        // IANA zone of the cron expression and of the grain dates; default UTC
	// Grain of the firing keys: key.GrainMinute (default), GrainHour or
	// GrainDay, dated in Timezone. A schedule may not fire twice in one grain.
	Grain key.Grain
	// Missed is what happens to firings missed while no scheduler ran:
	// MissedSkip (default) or MissedCatchUp.
	Missed string

	// The job of each firing.
	Kind        string
	Args        json.RawMessage // default {}
	Queue       string          // default DefaultQueue
	Priority    int
	MaxAttempts int            // default Config.MaxAttempts
	DedupWindow *time.Duration // how long a firing key blocks; default Config.DedupWindow, at least MinScheduleDedupWindow
	ResultTTL   *time.Duration // default the kind's result TTL
	Timeout     time.Duration  // limits each attempt (EnqueueOpts.Timeout); 0 = the queue's or kind's
	// Retry is the backoff policy of each firing's job (EnqueueOpts.Retry;
	// seed 004's 1 s → 5 s → 25 s is {Base: time.Second, Factor: 5});
	// nil = the queue's or kind's (Config.RetryByKind, RetryByQueue, Retry).
	Retry *RetryPolicy
}

// MinScheduleDedupWindow is the shortest dedup window of a firing key: a
// firing must stay deduplicated for longer than any scheduler can take to
// see that it fired.
const MinScheduleDedupWindow = time.Hour

// ScheduleInfo is a stored schedule and its firings.
type ScheduleInfo struct {
	Schedule
	CreatedAt time.Time
	UpdatedAt time.Time
	// LastFiredAt is the newest scheduled firing (run or skipped); nil before the first.
	LastFiredAt *time.Time
	// NextFireAt is the next firing after max(LastFiredAt, now); nil when there is none.
	NextFireAt *time.Time
	// LastJobID is the job of the newest firing or manual trigger (0: none),
	// LastJobState its state ("" when it was deleted by retention).
	LastJobID    int64
	LastJobState JobState
}

// scheduleSpec is the stored form of a Schedule (store.Schedule.Spec).
type scheduleSpec struct {
	Cron        string          `json:"cron,omitempty"`
	Every       string          `json:"every,omitempty"`
	Timezone    string          `json:"timezone,omitempty"`
	Grain       key.Grain       `json:"grain,omitempty"`
	Missed      string          `json:"missed,omitempty"`
	Kind        string          `json:"kind"`
	Args        json.RawMessage `json:"args,omitempty"`
	Queue       string          `json:"queue,omitempty"`
	Priority    int             `json:"priority,omitempty"`
	MaxAttempts int             `json:"max_attempts,omitempty"`
	DedupWindow string          `json:"dedup_window,omitempty"`
	ResultTTL   string          `json:"result_ttl,omitempty"`
	Timeout     string          `json:"timeout,omitempty"`
	Retry       *RetryPolicy    `json:"retry,omitempty"`
}

// timing returns the part of s the scheduler computes firings from.
func (s *Schedule) timing() maintenance.Timing {
	return maintenance.Timing{Cron: s.Cron, Every: s.Every, Timezone: s.Timezone, Grain: s.Grain, Missed: s.Missed}
}

// SchedulePut validates s and creates or replaces the schedule of that
// name, keeping its firing history. Bad input returns an error wrapping
// ErrInvalid (an *InvalidError naming the field) and stores nothing.
func (c *Client) SchedulePut(ctx context.Context, s *Schedule) (*ScheduleInfo, error) {
	spec, tenant, err := c.scheduleSpec(s)
	if err != nil {
		return nil, err
	}
	row, err := c.store.ScheduleUpsert(ctx, &store.ScheduleUpsertParams{Tenant: tenant, Name: s.Name, Spec: spec, Now: c.now()})
	if err != nil {
		return nil, fmt.Errorf("put schedule: %w", err)
	}
	return c.scheduleInfo(ctx, row)
}

// scheduleSpec validates s and returns its stored form and tenant.
func (c *Client) scheduleSpec(s *Schedule) ([]byte, string, error) {
	if s == nil {
		return nil, "", idemtype.Invalid("schedule", "is nil")
	}
	tenant := c.tenant(s.Tenant)
	if tenant == store.EveryTenant {
		return nil, "", idemtype.Invalid("tenant", "%q is reserved for default limits", store.EveryTenant)
	}
	if err := ValidateName("name", s.Name); err != nil {
		return nil, "", err
	}
	if _, err := key.Lock(s.Name, tenant, time.Unix(0, 0), nil, key.GrainDay, nil); err != nil {
		return nil, "", idemtype.Invalid("name", "must not contain ':'")
	}
	plan, err := maintenance.Compile(s.timing())
	if err == nil {
		err = plan.CheckGrain()
	}
	if err != nil {
		return nil, "", err
	}
	if s.DedupWindow != nil && *s.DedupWindow < MinScheduleDedupWindow {
		return nil, "", idemtype.Invalid("dedup_window", "must be at least %v for a schedule", MinScheduleDedupWindow)
	}
	if s.ResultTTL != nil && *s.ResultTTL <= 0 {
		return nil, "", idemtype.Invalid("result_ttl", "must be positive")
	}
	sp := scheduleSpec{Cron: s.Cron, Timezone: s.Timezone, Grain: s.Grain, Missed: plan.Missed(),
		Kind: s.Kind, Args: s.Args, Queue: s.Queue, Priority: s.Priority, MaxAttempts: s.MaxAttempts, Retry: s.Retry}
	if s.Every != 0 {
		sp.Every = s.Every.String()
	}
	if s.DedupWindow != nil {
		sp.DedupWindow = s.DedupWindow.String()
	}
	if s.ResultTTL != nil {
		sp.ResultTTL = s.ResultTTL.String()
	}
	if s.Timeout != 0 {
		sp.Timeout = s.Timeout.String()
	}
	// The job must be valid too: build a firing's insert without writing.
	if _, err := c.firingInsert(&sp, s.Name, tenant, plan.Location(), time.Unix(0, 0), ScheduleKeyPrefix+"check"); err != nil {
		return nil, "", err
	}
	b, err := json.Marshal(sp)
	if err != nil {
		return nil, "", fmt.Errorf("encode schedule: %w", err)
	}
	return b, tenant, nil
}

// ScheduleGet returns the schedule name of tenant ("" = Config.Tenant);
// an error wrapping ErrNotFound when there is none.
func (c *Client) ScheduleGet(ctx context.Context, tenant, name string) (*ScheduleInfo, error) {
	row, err := c.store.ScheduleGet(ctx, &store.ScheduleGetParams{Tenant: c.tenant(tenant), Name: name})
	if err != nil {
		return nil, err
	}
	return c.scheduleInfo(ctx, row)
}

// ScheduleList returns the schedules of tenant ("" = Config.Tenant), by name.
func (c *Client) ScheduleList(ctx context.Context, tenant string) ([]*ScheduleInfo, error) {
	rows, err := c.store.ScheduleList(ctx, &store.ScheduleListParams{Tenant: c.tenant(tenant)})
	if err != nil {
		return nil, err
	}
	out := make([]*ScheduleInfo, 0, len(rows))
	for _, r := range rows {
		info, err := c.scheduleInfo(ctx, r)
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

// ScheduleDelete deletes a schedule (ErrNotFound when there is none). The
// jobs it made are kept, and so are their keys: a schedule put again under
// the same name does not repeat a firing that already ran.
func (c *Client) ScheduleDelete(ctx context.Context, tenant, name string) error {
	return c.store.ScheduleDelete(ctx, &store.ScheduleGetParams{Tenant: c.tenant(tenant), Name: name})
}

// ScheduleTriggerOpts are the options of a manual trigger; nil = defaults.
type ScheduleTriggerOpts struct {
	// Key makes the trigger idempotent: triggers with the same Key make one
	// job. "" = every call is a new firing.
	Key string
}

// ScheduleTrigger fires the schedule now, outside its timetable. The job's
// key is "§{name}:{tenant}:trigger:{Key or a random token}": it never
// equals a scheduled firing's key, so it neither blocks nor repeats one.
// The job is made from the schedule as stored when it is inserted: a
// schedule replaced meanwhile is read again, one deleted meanwhile is
// ErrNotFound; one replaced after each of maxTriggerReads reads is
// ErrConflict (nothing fired; retry).
func (c *Client) ScheduleTrigger(ctx context.Context, tenant, name string, opts *ScheduleTriggerOpts) (*EnqueueResult, error) {
	trig := store.NewToken()
	if opts != nil && opts.Key != "" {
		if err := ValidateKey("key", opts.Key); err != nil {
			return nil, err
		}
		trig = opts.Key
	}
	for range maxTriggerReads {
		row, err := c.store.ScheduleGet(ctx, &store.ScheduleGetParams{Tenant: c.tenant(tenant), Name: name})
		if err != nil {
			return nil, err
		}
		var sp scheduleSpec
		if err := json.Unmarshal(row.Spec, &sp); err != nil {
			return nil, fmt.Errorf("schedule %q: decode: %w", name, err)
		}
		p, err := c.firingInsert(&sp, row.Name, row.Tenant, time.UTC, time.Time{},
			ScheduleKeyPrefix+row.Name+":"+row.Tenant+":trigger:"+trig)
		if err != nil {
			return nil, err
		}
		res, err := c.store.ScheduleFire(ctx, &store.ScheduleFireParams{Read: row, Job: p, Now: c.now()})
		if err != nil {
			return nil, fmt.Errorf("trigger schedule: %w", err)
		}
		if res.Stale {
			continue // replaced or deleted since the read: read it again
		}
		if res.Insert.Err != nil {
			return nil, fmt.Errorf("insert firing: %w", res.Insert.Err)
		}
		return c.inserted(res.Insert), nil
	}
	return nil, fmt.Errorf("trigger schedule %q: it changed %d times while being triggered; try again: %w", name, maxTriggerReads, ErrConflict)
}

// maxTriggerReads bounds the reads of a schedule that keeps changing under
// a ScheduleTrigger.
const maxTriggerReads = 10

// scheduleInfo decodes a stored schedule and adds its next firing and the
// state of its last job.
func (c *Client) scheduleInfo(ctx context.Context, row *store.Schedule) (*ScheduleInfo, error) {
	s, plan, err := decodeSchedule(row)
	if err != nil {
		return nil, err
	}
	info := &ScheduleInfo{Schedule: *s, CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt,
		LastFiredAt: row.LastFiredAt, LastJobID: row.LastJobID}
	from := c.now()
	if row.LastFiredAt != nil && row.LastFiredAt.After(from) {
		from = *row.LastFiredAt
	}
	if next := plan.Next(from); !next.IsZero() {
		info.NextFireAt = &next
	}
	if row.LastJobID != 0 {
		j, err := c.store.JobGet(ctx, &store.JobGetParams{Tenant: row.Tenant, ID: row.LastJobID})
		switch {
		case err == nil:
			info.LastJobState = j.State
		case !errors.Is(err, ErrNotFound):
			return nil, fmt.Errorf("schedule %q: last job: %w", row.Name, err)
		}
	}
	return info, nil
}

// decodeSchedule turns a stored schedule back into a Schedule and its Plan.
func decodeSchedule(row *store.Schedule) (*Schedule, *maintenance.Plan, error) {
	var sp scheduleSpec
	if err := json.Unmarshal(row.Spec, &sp); err != nil {
		return nil, nil, fmt.Errorf("schedule %q: decode: %w", row.Name, err)
	}
	s := &Schedule{Name: row.Name, Tenant: row.Tenant, Cron: sp.Cron, Timezone: sp.Timezone, Grain: sp.Grain,
		Missed: sp.Missed, Kind: sp.Kind, Args: sp.Args, Queue: sp.Queue, Priority: sp.Priority, MaxAttempts: sp.MaxAttempts,
		Retry: sp.Retry}
	var err error
	if sp.Every != "" {
		if s.Every, err = time.ParseDuration(sp.Every); err != nil {
			return nil, nil, fmt.Errorf("schedule %q: every: %w", row.Name, err)
		}
	}
	if s.DedupWindow, err = parseDurationPtr(sp.DedupWindow); err != nil {
		return nil, nil, fmt.Errorf("schedule %q: dedup_window: %w", row.Name, err)
	}
	if s.ResultTTL, err = parseDurationPtr(sp.ResultTTL); err != nil {
		return nil, nil, fmt.Errorf("schedule %q: result_ttl: %w", row.Name, err)
	}
	if sp.Timeout != "" {
		if s.Timeout, err = time.ParseDuration(sp.Timeout); err != nil {
			return nil, nil, fmt.Errorf("schedule %q: timeout: %w", row.Name, err)
		}
	}
	plan, err := maintenance.Compile(s.timing())
	if err != nil {
		return nil, nil, fmt.Errorf("schedule %q: %w", row.Name, err)
	}
	return s, plan, nil
}

func parseDurationPtr(s string) (*time.Duration, error) {
	if s == "" {
		return nil, nil
	}
	d, err := time.ParseDuration(s)
	return &d, err
}

// newScheduler returns the scheduler service of c.
func (c *Client) newScheduler(cfg *maintenance.Config) *maintenance.Scheduler {
	return maintenance.NewScheduler(c.store, cfg, planSchedule, c.fireSchedule)
}

// planSchedule is the scheduler's PlanFunc.
func planSchedule(row *store.Schedule) (*maintenance.Plan, error) {
	_, plan, err := decodeSchedule(row)
	return plan, err
}

// fireSchedule is the scheduler's FireFunc: it enqueues the job of one
// firing under its key, or finds the job another scheduler made, and
// records the firing, only while f.Schedule is still stored as read and
// f.At is after its stored mark (false, nil otherwise).
func (c *Client) fireSchedule(ctx context.Context, f *maintenance.Firing) (bool, error) {
	var sp scheduleSpec
	if err := json.Unmarshal(f.Schedule.Spec, &sp); err != nil {
		return false, fmt.Errorf("decode schedule: %w", err)
	}
	k, err := f.Plan.Key(f.Schedule.Name, f.Schedule.Tenant, f.At)
	if err != nil {
		return false, err
	}
	p, err := c.firingInsert(&sp, f.Schedule.Name, f.Schedule.Tenant, f.Plan.Location(), f.At, ScheduleKeyPrefix+k)
	if err != nil {
		return false, err
	}
	if r := f.Plan.Repeat(f.At); !r.IsZero() {
		// The repeat of this wall-clock time has the same key: the window
		// runs from the repeat, not only from now (it may be 1 h, the
		// length of the repeated hour).
		p.DedupWindow = max(p.DedupWindow, r.Sub(c.now())+p.DedupWindow)
	}
	res, err := c.store.ScheduleFire(ctx, &store.ScheduleFireParams{Read: f.Schedule, At: f.At, Job: p, Now: c.now()})
	if err != nil {
		return false, fmt.Errorf("fire schedule: %w", err)
	}
	var reused *idemtype.KeyReusedError
	switch {
	case res.Stale:
		return false, nil
	case errors.As(res.Insert.Err, &reused):
		// Fired before the schedule changed: that firing has its job.
		// Record it as fired, without a job (again only while unchanged).
		res, err = c.store.ScheduleFire(ctx, &store.ScheduleFireParams{Read: f.Schedule, At: f.At, Now: c.now()})
		if err != nil {
			return false, fmt.Errorf("fire schedule: %w", err)
		}
		return !res.Stale, nil
	case res.Insert.Err != nil:
		return false, fmt.Errorf("insert firing: %w", res.Insert.Err)
	}
	c.inserted(res.Insert)
	return true, nil
}

// firingInsert builds the job of a firing at time at (zero: a manual
// trigger, run now), with the idempotency key idemKey. Its metadata names
// the schedule and the firing time.
func (c *Client) firingInsert(sp *scheduleSpec, name, tenant string, loc *time.Location, at time.Time, idemKey string) (*store.JobInsertParams, error) {
	m := map[string]string{"schedule": name, "trigger": "manual"}
	if !at.IsZero() {
		m = map[string]string{"schedule": name, "fired_at": at.In(loc).Format(time.RFC3339)}
	}
	meta, _ := json.Marshal(m)
	o := &EnqueueOpts{Tenant: tenant, Queue: sp.Queue, Priority: sp.Priority, MaxAttempts: sp.MaxAttempts,
		RunAt: at, Metadata: meta, IdempotencyKey: "schedule", Retry: sp.Retry}
	dw := max(c.cfg.DedupWindow, MinScheduleDedupWindow)
	o.DedupWindow = &dw
	var err error
	if o.DedupWindow, err = orDuration(sp.DedupWindow, o.DedupWindow); err != nil {
		return nil, idemtype.Invalid("dedup_window", "%v", err)
	}
	if o.ResultTTL, err = orDuration(sp.ResultTTL, nil); err != nil {
		return nil, idemtype.Invalid("result_ttl", "%v", err)
	}
	if sp.Timeout != "" {
		if o.Timeout, err = time.ParseDuration(sp.Timeout); err != nil {
			return nil, idemtype.Invalid("timeout", "%v", err)
		}
	}
	p, err := c.buildInsert(EnqueueParams{Kind: sp.Kind, Args: sp.Args, Opts: o}, c.now(), true)
	if err != nil {
		return nil, err
	}
	p.IdempotencyKey = idemKey
	return p, nil
}

func orDuration(s string, def *time.Duration) (*time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	return &d, err
}

// inserted wakes the queue of a firing's new job and tells the observer
// about the job, new or existing.
func (c *Client) inserted(r store.JobInsertResult) *EnqueueResult {
	if r.Existing {
		c.observe(EventDeduplicated, r.Job, nil)
	} else {
		c.wake(r.Job.Queue)
		c.observe(EventEnqueued, r.Job, nil)
	}
	return &EnqueueResult{Job: r.Job, Existing: r.Existing}
}
