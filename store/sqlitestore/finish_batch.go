package sqlitestore

import (
	"fmt"
	"strings"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// Batched finishes: one INSERT … SELECT writes the ended attempts of a
// batch and one UPDATE … FROM finishes its jobs, instead of two statements
// per job. The items are bound as parameters of a VALUES list (the CTE v),
// finishChunk rows at a time; a chunk is padded with NULL rows, which match
// no job, to a power of two so that few statements are prepared and cached.
// (Binding beats a JSON array read with json_each: extracting the fields of
// each item cost more CPU than the updates themselves.)

// finishCols are the columns of the CTE v, one row per finish item.
const finishCols = 16

const (
	// qJobFinishBatchTail finishes the jobs of v that run under the item's
	// token (v is prepended by finishSQL).
	qJobFinishBatchTail = ` UPDATE jobs SET
    state            = v.st,
    finished_at      = v.fin,
    last_error       = CASE WHEN v.err <> '' THEN v.err ELSE jobs.last_error END,
    error_code       = CASE WHEN v.err <> '' THEN v.code ELSE jobs.error_code END,
    result           = CASE WHEN v.st = 'completed' THEN v.res ELSE jobs.result END,
    was_cached       = v.wc,
    original_job_id  = v.orig,
    run_at           = COALESCE(v.run, jobs.run_at),
    attempt          = jobs.attempt - v.sn,
    duration_ms      = CASE WHEN v.st = 'completed' THEN v.dur ELSE jobs.duration_ms END,
    lease_expires_at = NULL
FROM v
WHERE jobs.id = v.id AND jobs.state = 'running' AND jobs.lease_token = v.tok
RETURNING jobs.id, jobs.tenant, jobs.idempotency_key, jobs.dedup_window_us, jobs.result_ttl_us`

	// qAttemptFinishBatchTail writes the ended attempt of each job of v
	// that runs under the item's token — exactly the jobs the update then
	// finishes — from the job row as it still is (attempt number,
	// started_at, worker). It runs first: the update changes the row. An
	// attempt is stored once, when it ends; a repeat completion matches no
	// running job and writes nothing; a completion that is not a delivery
	// writes none (the completed job row is its record,
	// docs/state-machine.md, "Attempts").
	qAttemptFinishBatchTail = ` INSERT INTO attempts (job_id, attempt, started_at, finished_at, duration_ms,
    outcome, error, worker_id, target, http_status)
SELECT jobs.id, jobs.attempt, jobs.started_at, v.endus, v.dur, v.out, v.err, jobs.worker_id, v.tgt, v.http
FROM v JOIN jobs ON jobs.id = v.id
WHERE jobs.state = 'running' AND jobs.lease_token = v.tok AND NOT (v.st = 'completed' AND v.tgt = '')`

	finishCTEHead = `WITH v(id, tok, st, fin, err, res, wc, orig, run, sn, endus, dur, out, http, tgt, code) AS (VALUES `
	finishCTERow  = `(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`
)

// finishChunk is the most items bound in one statement.
const finishChunk = 128

// finishSQL returns the statement with a VALUES list of n rows before tail.
func finishSQL(n int, tail string) string {
	return finishCTEHead + strings.Repeat(finishCTERow+",", n-1) + finishCTERow + ")" + tail
}

// chunkRows rounds n up to a power of two (at most finishChunk).
func chunkRows(n int) int {
	r := 1
	for r < n {
		r <<= 1
	}
	return min(r, finishChunk)
}

// finishArgs appends the VALUES row of p to args.
func finishArgs(args []any, p *store.JobFinishParams) []any {
	fin := toUS(store.OrNow(p.FinishedAt))
	var finished, runAt, res any
	if p.State.Finished() {
		finished = fin
	}
	if (p.State == idemtype.StateRetryable || p.State == idemtype.StateScheduled) && !p.RunAt.IsZero() {
		runAt = toUS(p.RunAt)
	}
	if p.State == idemtype.StateCompleted && p.Result != nil {
		res = []byte(p.Result)
	}
	return append(args, p.ID, p.LeaseToken, string(p.State), finished, p.Error, res, boolInt(p.WasCached),
		p.OriginalJobID, runAt, boolInt(p.Snooze), fin, p.DurationMS, string(p.Outcome), p.HTTPStatus, p.Target, p.ErrorCode)
}

// finishedRow is what the batch update returns for one job.
type finishedRow struct {
	tenant, key    string
	dedupUS, ttlUS int64
}

// finishBatch finishes ps (distinct job ids) and returns the per-item errors.
func finishBatch(t *wtx, ps []*store.JobFinishParams, deps map[int64]bool) ([]error, error) {
	done := make(map[int64]finishedRow, len(ps))
	args := make([]any, 0, min(len(ps), finishChunk)*finishCols)
	for rest := ps; len(rest) > 0; {
		chunk := rest[:min(len(rest), finishChunk)]
		rest = rest[len(chunk):]
		rowsN := chunkRows(len(chunk))
		args = args[:0]
		for _, p := range chunk {
			args = finishArgs(args, p)
		}
		for range (rowsN - len(chunk)) * finishCols {
			args = append(args, nil) // padding rows: id NULL matches no job
		}
		if writesAttempt(chunk) {
			if _, err := t.exec(finishSQL(rowsN, qAttemptFinishBatchTail), args...); err != nil {
				return nil, fmt.Errorf("end attempts: %w", err)
			}
		}
		rows, err := t.query(finishSQL(rowsN, qJobFinishBatchTail), args...)
		if err != nil {
			return nil, fmt.Errorf("finish jobs: %w", err)
		}
		for rows.Next() {
			var id int64
			var r finishedRow
			if err := rows.Scan(&id, &r.tenant, &r.key, &r.dedupUS, &r.ttlUS); err != nil {
				rows.Close()
				return nil, err
			}
			done[id] = r
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	errs := make([]error, len(ps))
	for i, p := range ps {
		r, ok := done[p.ID]
		if !ok {
			e, err := repeatCompletion(t, p)
			if err != nil {
				return nil, err
			}
			errs[i] = e
			continue
		}
		if err := finishTail(t, p, deps[p.ID], r); err != nil {
			return nil, err
		}
	}
	return errs, nil
}

// writesAttempt reports whether qAttemptFinishBatchTail can write a row
// for any item of ps: it writes none for a completion that is not a
// delivery, so a chunk of such completions (the common case) skips the
// statement and its join.
func writesAttempt(ps []*store.JobFinishParams) bool {
	for _, p := range ps {
		if p.State != idemtype.StateCompleted || p.Target != "" {
			return true
		}
	}
	return false
}

// distinctIDs reports whether every item names another job.
func distinctIDs(ps []*store.JobFinishParams) bool {
	seen := make(map[int64]struct{}, len(ps))
	for _, p := range ps {
		if _, ok := seen[p.ID]; ok {
			return false
		}
		seen[p.ID] = struct{}{}
	}
	return true
}
