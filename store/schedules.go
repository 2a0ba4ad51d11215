package store

import (
	"context"
	"encoding/json"
	"time"
)

// Schedules stores the schedules of the scheduler (package idem owns their
// meaning; the store keeps Spec byte for byte). A schedule is identified by
// (Tenant, Name); a tenant never sees another tenant's schedules.
type Schedules interface {
	// ScheduleUpsert creates the schedule (Tenant, Name) with CreatedAt =
	// UpdatedAt = Now, or replaces the Spec of an existing one (UpdatedAt =
	// Now; CreatedAt, LastFiredAt and LastJobID are kept). It returns the
	// stored schedule.
	ScheduleUpsert(ctx context.Context, p *ScheduleUpsertParams) (*Schedule, error)
	// ScheduleGet returns the schedule (Tenant, Name); ErrNotFound when
	// there is none.
	ScheduleGet(ctx context.Context, p *ScheduleGetParams) (*Schedule, error)
	// ScheduleList returns the schedules of Tenant ("" = every tenant),
	// ordered by tenant, then name.
	ScheduleList(ctx context.Context, p *ScheduleListParams) ([]*Schedule, error)
	// ScheduleDelete deletes the schedule (Tenant, Name); ErrNotFound when
	// there is none. The jobs it made are never touched.
	ScheduleDelete(ctx context.Context, p *ScheduleGetParams) error
	// ScheduleFired records a firing of (Tenant, Name): with At set,
	// LastFiredAt = At and LastJobID = JobID (kept when JobID is 0: a
	// skipped firing) only when At is after the
	// stored LastFiredAt (or there is none) — the mark only moves forward,
	// so a late or repeated call never moves it back; with At zero (a
	// manual trigger) only LastJobID = JobID. It reports whether it
	// changed the row; a schedule that does not exist is not an error
	// (false).
	ScheduleFired(ctx context.Context, p *ScheduleFiredParams) (bool, error)
}

// Schedule is one stored schedule.
type Schedule struct {
	Tenant      string
	Name        string
	Spec        json.RawMessage // the definition, as package idem wrote it
	CreatedAt   time.Time
	UpdatedAt   time.Time
	LastFiredAt *time.Time // the newest scheduled firing enqueued; nil before the first
	LastJobID   int64      // the job of the newest firing (or manual trigger); 0 = none
}

// ScheduleUpsertParams creates or replaces a schedule.
type ScheduleUpsertParams struct {
	Tenant string
	Name   string
	Spec   json.RawMessage
	Now    time.Time
}

// ScheduleGetParams names one schedule.
type ScheduleGetParams struct {
	Tenant string
	Name   string
}

// ScheduleListParams selects schedules.
type ScheduleListParams struct {
	Tenant string // "" = every tenant
}

// ScheduleFiredParams records one firing.
type ScheduleFiredParams struct {
	Tenant string
	Name   string
	At     time.Time // the firing time; zero = a manual trigger
	JobID  int64
}
