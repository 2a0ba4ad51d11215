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
	// (false). It checks nothing else: the scheduler and manual triggers
	// fire through ScheduleFire, which records the same way only while the
	// schedule is unchanged.
	ScheduleFired(ctx context.Context, p *ScheduleFiredParams) (bool, error)
	// ScheduleFire is a firing that happens only while the schedule is the
	// definition it was computed from and the firing is newer than the
	// schedule's mark: in one transaction it checks that the row
	// (Read.Tenant, Read.Name) still exists with Read's CreatedAt (the same
	// row, not one deleted and put back) and Spec (byte for byte; UpdatedAt
	// is not compared, so a put of the unchanged Spec leaves a read
	// current), and, when At is set, that At is after the stored
	// LastFiredAt (or there is none) — PostgreSQL locks the row for the
	// check, so a delete, replace or other firing waits for the firing's
	// commit or makes the check fail; SQLite checks it on its single
	// writer. It then inserts Job as JobInsertMany does and records the
	// firing as ScheduleFired does, with JobID = the job's id. When the
	// check fails nothing is written and Stale is set: a schedule deleted or
	// replaced after a scheduler read it never fires with the old
	// definition, and no scheduler — a stale leader, one that has not seen
	// the mark — fires a slot at or before the mark (fired, or skipped as
	// missed, already). A manual trigger (At zero) is not held by the mark.
	// Job nil records a skipped firing (the mark only, under the same
	// check). When the job's insert fails (Insert.Err, e.g. a
	// *KeyReusedError) the firing is not recorded.
	ScheduleFire(ctx context.Context, p *ScheduleFireParams) (*ScheduleFireResult, error)
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

// ScheduleFireParams is one conditional firing (Schedules.ScheduleFire).
type ScheduleFireParams struct {
	// Read is the schedule as the caller read it (ScheduleGet, ScheduleList
	// or ScheduleUpsert): its Tenant and Name name the row, its Spec and
	// CreatedAt must still be stored.
	Read *Schedule
	At   time.Time        // the firing time; zero = a manual trigger (LastJobID only)
	Job  *JobInsertParams // the firing's job; nil = a skipped firing (no job)
	Now  time.Time        // the insert's now
}

// ScheduleFireResult is the outcome of a ScheduleFire.
type ScheduleFireResult struct {
	// Stale: the schedule was deleted or changed since Read, or At is not
	// after its stored LastFiredAt (that slot or a later one was fired or
	// skipped already); nothing was written.
	Stale bool
	// Insert is the job's insert (the new or existing job, or Err); zero
	// when Stale or when there was no Job.
	Insert JobInsertResult
	// Changed: the firing moved the schedule's mark (as ScheduleFired's result).
	Changed bool
}
