package pgstore

import (
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// scanJob scans the columns of jobCols.
func scanJob(row pgx.Row) (*idemtype.JobRow, error) { return scanJobThen(row) }

// scanClaimed scans a claim's row: jobCols and keyHeld.
func scanClaimed(row pgx.Row) (*idemtype.JobRow, error) {
	var held *bool
	j, err := scanJobThen(row, &held)
	if err != nil {
		return nil, err
	}
	j.KeyHeld = held != nil && *held
	return j, nil
}

// scanJobThen scans the columns of jobCols followed by those of more.
func scanJobThen(row pgx.Row, more ...any) (*idemtype.JobRow, error) {
	var (
		j                          idemtype.JobRow
		args                       string
		state                      string
		result, metadata, retry    *string
		startedAt, finishedAt, lex *time.Time
		resolvedAt                 *time.Time
		leaseToken, workerID       string
		timeoutUS                  int64
	)
	dest := []any{&j.ID, &j.Tenant, &j.Queue, &j.Kind, &args, &state, &j.Priority, &j.Attempt,
		&j.MaxAttempts, &j.RunAt, &j.CreatedAt, &startedAt, &finishedAt, &j.PartitionKey,
		&j.IdempotencyKey, &j.DependsOn, &result, &j.WasCached, &j.OriginalJobID, &j.LastError,
		&metadata, &leaseToken, &lex, &workerID, &retry, &j.ErrorCode, &resolvedAt, &j.ResolutionNote, &timeoutUS}
	err := row.Scan(append(dest, more...)...)
	if err != nil {
		return nil, err
	}
	j.Args = json.RawMessage(args)
	j.State = idemtype.JobState(state)
	j.LastError = store.ReadError(j.LastError)
	j.RunAt, j.CreatedAt = utc(j.RunAt), utc(j.CreatedAt)
	j.StartedAt, j.FinishedAt = utcP(startedAt), utcP(finishedAt)
	j.ResolvedAt = utcP(resolvedAt)
	if result != nil {
		j.Result = json.RawMessage(*result)
	}
	if metadata != nil {
		j.Metadata = json.RawMessage(*metadata)
	}
	if retry != nil {
		j.RetryPolicy = json.RawMessage(*retry)
	}
	j.Timeout = time.Duration(timeoutUS) * time.Microsecond
	if len(j.DependsOn) == 0 {
		j.DependsOn = nil
	}
	if j.State == idemtype.StateRunning {
		j.LeaseToken, j.LeaseExpiresAt, j.WorkerID = leaseToken, utcP(lex), workerID
	}
	// A cancelled job that keeps its lease holds it (docs/state-machine.md,
	// "FIFO partitions"): its handler may still run.
	j.Held = j.State == idemtype.StateCancelled && lex != nil
	return &j, nil
}

// collectJobs scans every row of rows.
func collectJobs(rows pgx.Rows) ([]*idemtype.JobRow, error) {
	return collect(rows, scanJob)
}

// collect scans every row of rows with scan and closes rows (nil when
// there is none).
func collect[T any](rows pgx.Rows, scan func(pgx.Row) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// scanRecord scans the columns of recordCols.
func scanRecord(row pgx.Row) (*idemtype.Record, error) {
	var r idemtype.Record
	var status string
	err := row.Scan(&r.Tenant, &r.Key, &status, &r.Fingerprint, &r.JobID, &r.ResultJobID, &r.Result,
		&r.ResultHash, &r.SizeBytes, &r.Compressed, &r.LeaseOwner, &r.LeaseUntil, &r.CreatedAt,
		&r.CompletedAt, &r.DedupUntil, &r.ExpiresAt, &r.DurationMS, &r.ResultExpiresAt)
	if err != nil {
		return nil, err
	}
	r.Status = idemtype.RecordStatus(status)
	r.CreatedAt = utc(r.CreatedAt)
	r.LeaseUntil, r.CompletedAt = utcP(r.LeaseUntil), utcP(r.CompletedAt)
	r.DedupUntil, r.ExpiresAt = utcP(r.DedupUntil), utcP(r.ExpiresAt)
	r.ResultExpiresAt = utcP(r.ResultExpiresAt)
	return &r, nil
}

// scanAPIKey scans the columns of apiKeyCols.
func scanAPIKey(row pgx.Row) (*store.APIKey, error) {
	var k store.APIKey
	if err := row.Scan(&k.ID, &k.Hash, &k.Tenant, &k.Admin, &k.Name, &k.CreatedAt, &k.RevokedAt); err != nil {
		return nil, err
	}
	k.CreatedAt = utc(k.CreatedAt)
	k.RevokedAt = utcP(k.RevokedAt)
	return &k, nil
}

// scanAttempt reads one attempt: job_id, attempt, started_at, finished_at,
// duration_ms, outcome, error, worker_id, target, http_status.
func scanAttempt(row pgx.Row) (*idemtype.Attempt, error) { return scanAttemptThen(row) }

// scanAttemptThen scans the columns of scanAttempt followed by those of
// more.
func scanAttemptThen(row pgx.Row, more ...any) (*idemtype.Attempt, error) {
	var a idemtype.Attempt
	var outcome string
	var status int32
	if err := row.Scan(append([]any{&a.JobID, &a.Attempt, &a.StartedAt, &a.FinishedAt, &a.DurationMS, &outcome,
		&a.Error, &a.WorkerID, &a.Target, &status}, more...)...); err != nil {
		return nil, err
	}
	a.Outcome, a.HTTPStatus = idemtype.Outcome(outcome), int(status)
	a.Error = store.ReadError(a.Error)
	a.StartedAt, a.FinishedAt = utc(a.StartedAt), utcP(a.FinishedAt)
	return &a, nil
}
