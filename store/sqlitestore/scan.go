package sqlitestore

import (
	"database/sql"
	"strconv"
	"strings"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// toUS converts t to unix microseconds.
func toUS(t time.Time) int64 { return t.UnixMicro() }

// fromUS converts unix microseconds to a UTC time.
func fromUS(us int64) time.Time { return time.UnixMicro(us).UTC() }

// truncUS returns t in UTC at microsecond precision (what the store keeps).
func truncUS(t time.Time) time.Time { return fromUS(toUS(t)) }

// nullUS is t in microseconds, or NULL for a zero time.
func nullUS(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return toUS(t)
}

// ptrUS converts a nullable column to a *time.Time.
func ptrUS(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromUS(v.Int64)
	return &t
}

// nullBytes is b, or NULL when b is nil.
func nullBytes(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func formatIDs(ids []int64) string {
	if len(ids) == 0 {
		return ""
	}
	var sb strings.Builder
	for i, id := range ids {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.FormatInt(id, 10))
	}
	return sb.String()
}

func parseIDs(s string) []int64 {
	if s == "" {
		return nil
	}
	parts := strings.Split(s, ",")
	ids := make([]int64, 0, len(parts))
	for _, p := range parts {
		if id, err := strconv.ParseInt(p, 10, 64); err == nil {
			ids = append(ids, id)
		}
	}
	return ids
}

type scanner interface{ Scan(dest ...any) error }

// scanJob reads one row selected with jobCols.
func scanJob(sc scanner) (*idemtype.JobRow, error) { return scanJobThen(sc) }

// scanClaimed reads a claim's row: jobCols and qKeyHeld.
func scanClaimed(sc scanner) (*idemtype.JobRow, error) {
	var held int
	j, err := scanJobThen(sc, &held)
	if err != nil {
		return nil, err
	}
	j.KeyHeld = held != 0
	return j, nil
}

// scanJobThen reads the columns of jobCols followed by those of more.
func scanJobThen(sc scanner, more ...any) (*idemtype.JobRow, error) {
	var (
		j                                   idemtype.JobRow
		state                               string
		runAt, createdAt                    int64
		startedAt, finishedAt, leaseExpires sql.NullInt64
		resolvedAt                          sql.NullInt64
		dependsOn                           sql.NullString
		args, result, metadata, retry       []byte
		wasCached                           int
		timeoutUS                           int64
	)
	dest := []any{&j.ID, &j.Tenant, &j.Queue, &j.Kind, &args, &state, &j.Priority, &j.Attempt,
		&j.MaxAttempts, &runAt, &createdAt, &startedAt, &finishedAt, &j.PartitionKey,
		&j.IdempotencyKey, &dependsOn, &result, &wasCached, &j.OriginalJobID, &j.LastError,
		&metadata, &j.LeaseToken, &leaseExpires, &j.WorkerID, &retry, &j.ErrorCode, &resolvedAt, &j.ResolutionNote, &timeoutUS}
	err := sc.Scan(append(dest, more...)...)
	if err != nil {
		return nil, err
	}
	j.State = idemtype.JobState(state)
	j.LastError = store.ReadError(j.LastError)
	j.Args = args
	j.Result = result
	j.Metadata = metadata
	j.RetryPolicy = retry
	j.Timeout = time.Duration(timeoutUS) * time.Microsecond
	j.RunAt = fromUS(runAt)
	j.CreatedAt = fromUS(createdAt)
	j.StartedAt = ptrUS(startedAt)
	j.FinishedAt = ptrUS(finishedAt)
	j.ResolvedAt = ptrUS(resolvedAt)
	j.DependsOn = parseIDs(dependsOn.String)
	j.WasCached = wasCached != 0
	// A cancelled job that keeps its lease holds it (docs/state-machine.md,
	// "FIFO partitions"): its handler may still run.
	j.Held = j.State == idemtype.StateCancelled && leaseExpires.Valid
	if j.State == idemtype.StateRunning {
		j.LeaseExpiresAt = ptrUS(leaseExpires)
	} else {
		j.LeaseToken = "" // kept internally for the repeat-completion check
	}
	return &j, nil
}

// scanRecord reads one row selected with recordCols.
func scanRecord(sc scanner) (*idemtype.Record, error) {
	var (
		r                                              idemtype.Record
		status                                         string
		result                                         []byte
		compressed                                     int
		createdAt                                      int64
		leaseUntil, completedAt, dedupUntil, expiresAt sql.NullInt64
		resultExpiresAt                                sql.NullInt64
	)
	err := sc.Scan(&r.Tenant, &r.Key, &status, &r.Fingerprint, &r.JobID, &r.ResultJobID, &result,
		&r.ResultHash, &r.SizeBytes, &compressed, &r.LeaseOwner, &leaseUntil, &createdAt,
		&completedAt, &dedupUntil, &expiresAt, &r.DurationMS, &resultExpiresAt)
	if err != nil {
		return nil, err
	}
	r.Status = idemtype.RecordStatus(status)
	r.Result = result
	r.Compressed = compressed != 0
	r.LeaseUntil = ptrUS(leaseUntil)
	r.CreatedAt = fromUS(createdAt)
	r.CompletedAt = ptrUS(completedAt)
	r.DedupUntil = ptrUS(dedupUntil)
	r.ExpiresAt = ptrUS(expiresAt)
	r.ResultExpiresAt = ptrUS(resultExpiresAt)
	return &r, nil
}

// scanAttempt reads one row selected with attemptCols.
func scanAttempt(sc scanner) (*idemtype.Attempt, error) { return scanAttemptThen(sc) }

// scanAttemptThen reads the columns of attemptCols followed by those of more.
func scanAttemptThen(sc scanner, more ...any) (*idemtype.Attempt, error) {
	var (
		a          idemtype.Attempt
		startedAt  int64
		finishedAt sql.NullInt64
		outcome    string
	)
	err := sc.Scan(append([]any{&a.JobID, &a.Attempt, &startedAt, &finishedAt, &a.DurationMS, &outcome,
		&a.Error, &a.WorkerID, &a.Target, &a.HTTPStatus}, more...)...)
	if err != nil {
		return nil, err
	}
	a.StartedAt = fromUS(startedAt)
	a.FinishedAt = ptrUS(finishedAt)
	a.Outcome = idemtype.Outcome(outcome)
	a.Error = store.ReadError(a.Error)
	return &a, nil
}

// collect scans every row of rows with scan and closes rows (nil when
// there is none).
func collect[T any](rows *sql.Rows, scan func(scanner) (T, error)) ([]T, error) {
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
