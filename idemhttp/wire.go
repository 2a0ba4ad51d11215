package idemhttp

import (
	"encoding/json"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp/wire"
	"github.com/idem-dev/idem/idemtype"
)

// renderJob converts a row; withLease includes the lease token (claims only).
func renderJob(j *idemtype.JobRow, withLease bool) *wire.Job {
	out := new(wire.Job)
	renderJobInto(out, j, withLease)
	return out
}

// renderJobInto is renderJob into out (POST /v1/jobs renders its reply's job on
// the stack).
func renderJobInto(out *wire.Job, j *idemtype.JobRow, withLease bool) {
	*out = wire.Job{
		ID: formatID(j.ID), Tenant: j.Tenant, Queue: j.Queue, Kind: j.Kind, Args: j.Args,
		State: string(j.State), Priority: j.Priority, Attempt: j.Attempt, MaxAttempts: j.MaxAttempts,
		RunAt: j.RunAt, CreatedAt: j.CreatedAt, StartedAt: j.StartedAt, FinishedAt: j.FinishedAt,
		PartitionKey: j.PartitionKey, IdempotencyKey: j.IdempotencyKey, Result: rawOrNil(j.Result),
		WasCached: j.WasCached, LastError: j.LastError, ErrorCode: j.ErrorCode,
		ResolvedAt: j.ResolvedAt, ResolutionNote: j.ResolutionNote, Metadata: rawOrNil(j.Metadata), WorkerID: j.WorkerID,
	}
	if len(out.Args) == 0 {
		out.Args = json.RawMessage("{}")
	}
	if j.OriginalJobID != 0 {
		out.OriginalJobID = formatID(j.OriginalJobID)
	}
	for _, d := range j.DependsOn {
		out.DependsOn = append(out.DependsOn, formatID(d))
	}
	if withLease {
		out.LeaseToken, out.LeaseExpiresAt = j.LeaseToken, j.LeaseExpiresAt
	}
	out.Retry = renderRetry(j.RetryPolicy)
}

// renderRetry converts a job's stored retry policy (nil = none, as is
// one that does not decode).
func renderRetry(raw json.RawMessage) *wire.RetrySpec {
	if len(raw) == 0 {
		return nil
	}
	var p idem.RetryPolicy
	if json.Unmarshal(raw, &p) != nil {
		return nil
	}
	return retrySpec(&p)
}

// retrySpec is the wire form of p: a field left zero (idem's default) is
// not written, and a jitter turned off (negative) reads 0, as it is given
// over HTTP.
func retrySpec(p *idem.RetryPolicy) *wire.RetrySpec {
	out := &wire.RetrySpec{}
	dur := func(d time.Duration) *string {
		if d == 0 {
			return nil
		}
		s := d.String()
		return &s
	}
	out.Base, out.Max = dur(p.Base), dur(p.Max)
	if p.Factor != 0 {
		f := p.Factor
		out.Factor = &f
	}
	if p.Jitter != 0 {
		j := max(p.Jitter, 0)
		out.Jitter = &j
	}
	for _, d := range p.Delays {
		out.Delays = append(out.Delays, d.String())
	}
	return out
}

// renderJobs converts rows; the result is never nil (an empty list is []).
func renderJobs(rows []*idemtype.JobRow, withLease bool) []*wire.Job {
	out := make([]*wire.Job, 0, len(rows))
	for _, r := range rows {
		out = append(out, renderJob(r, withLease))
	}
	return out
}

// renderAttempt converts an attempt.
func renderAttempt(a *idemtype.Attempt) *wire.Attempt {
	return &wire.Attempt{Attempt: a.Attempt, StartedAt: a.StartedAt, FinishedAt: a.FinishedAt,
		DurationMS: a.DurationMS, Outcome: string(a.Outcome), Error: a.Error, Worker: a.WorkerID,
		Target: a.Target, HTTPStatus: a.HTTPStatus}
}

// renderRecord converts an idempotency record.
func renderRecord(r *idemtype.Record) *wire.Record {
	out := &wire.Record{Key: r.Key, Status: string(r.Status), ResultHash: r.ResultHash, CreatedAt: r.CreatedAt,
		CompletedAt: r.CompletedAt, DedupUntil: r.DedupUntil, ExpiresAt: r.ExpiresAt,
		ResultExpiresAt: r.ResultExpiresAt, SizeBytes: r.SizeBytes}
	if r.JobID != 0 {
		out.JobID = formatID(r.JobID)
	}
	if r.ResultJobID != 0 {
		out.ResultJobID = formatID(r.ResultJobID)
	}
	if r.Status == idemtype.RecordCompleted {
		d := r.DurationMS
		out.DurationMS = &d
	}
	return out
}

// apiTime is a time computed from the clock (a lease's end, a result's
// storing) as the API writes every time: in microseconds, the precision
// of both stores, so that it reads as the times read back from them do
// (a renew's lease_expires_at had nanoseconds).
func apiTime(t time.Time) time.Time { return t.Truncate(time.Microsecond) }
