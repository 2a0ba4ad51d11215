package sqlitestore

import (
	"encoding/json"
	"fmt"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// Batched finishes: one UPDATE … FROM json_each for every job of the batch
// and one for their attempts, instead of two statements per job. What is
// left per job (dependants, idempotency records, repeat completions) runs
// only for the jobs that need it.
const (
	// qFinishItems unpacks the JSON array ?1 of finish items.
	qFinishItems = `SELECT json_extract(value, '$.id') AS id, json_extract(value, '$.tok') AS tok,
    json_extract(value, '$.st') AS st, json_extract(value, '$.fin') AS fin,
    json_extract(value, '$.err') AS err, CAST(json_extract(value, '$.res') AS BLOB) AS res,
    json_extract(value, '$.wc') AS wc, json_extract(value, '$.orig') AS orig,
    json_extract(value, '$.run') AS run, json_extract(value, '$.sn') AS sn,
    json_extract(value, '$.end') AS endus, json_extract(value, '$.dur') AS dur,
    json_extract(value, '$.out') AS out, json_extract(value, '$.http') AS http,
    json_extract(value, '$.tgt') AS tgt
FROM json_each(?1)`

	qJobFinishBatch = `UPDATE jobs SET
    state            = v.st,
    finished_at      = v.fin,
    last_error       = CASE WHEN v.err <> '' THEN v.err ELSE jobs.last_error END,
    result           = CASE WHEN v.st = 'completed' THEN v.res ELSE jobs.result END,
    was_cached       = v.wc,
    original_job_id  = v.orig,
    run_at           = COALESCE(v.run, jobs.run_at),
    attempt          = jobs.attempt - v.sn,
    lease_expires_at = NULL
FROM (` + qFinishItems + `) AS v
WHERE jobs.id = v.id AND jobs.state = 'running' AND jobs.lease_token = v.tok
RETURNING jobs.id, jobs.tenant, jobs.idempotency_key, jobs.dedup_window_us, jobs.result_ttl_us`

	// qAttemptEndBatch finishes the latest attempt of each job in ?1 (only
	// the jobs the batch update just finished).
	qAttemptEndBatch = `UPDATE attempts SET finished_at = v.endus, duration_ms = v.dur, outcome = v.out,
    error = v.err, http_status = v.http, target = v.tgt
FROM (` + qFinishItems + `) AS v
WHERE attempts.job_id = v.id AND attempts.id = (SELECT max(a.id) FROM attempts a WHERE a.job_id = v.id)`
)

// finishItem is the JSON form of one finish for qFinishItems.
type finishItem struct {
	ID   int64   `json:"id"`
	Tok  string  `json:"tok"`
	St   string  `json:"st"`
	Fin  *int64  `json:"fin"`
	Err  string  `json:"err"`
	Res  *string `json:"res"`
	WC   int     `json:"wc"`
	Orig int64   `json:"orig"`
	Run  *int64  `json:"run"`
	Sn   int     `json:"sn"`
	End  int64   `json:"end"`
	Dur  int64   `json:"dur"`
	Out  string  `json:"out"`
	HTTP int     `json:"http"`
	Tgt  string  `json:"tgt"`
}

func newFinishItem(p *store.JobFinishParams) finishItem {
	fin := toUS(store.OrNow(p.FinishedAt))
	it := finishItem{ID: p.ID, Tok: p.LeaseToken, St: string(p.State), Err: p.Error, WC: boolInt(p.WasCached),
		Orig: p.OriginalJobID, Sn: boolInt(p.Snooze), End: fin, Dur: p.DurationMS, Out: string(p.Outcome),
		HTTP: p.HTTPStatus, Tgt: p.Target}
	if p.State.Finished() {
		it.Fin = &fin
	}
	if (p.State == idemtype.StateRetryable || p.State == idemtype.StateScheduled) && !p.RunAt.IsZero() {
		run := toUS(p.RunAt)
		it.Run = &run
	}
	if p.State == idemtype.StateCompleted && p.Result != nil {
		res := string(p.Result)
		it.Res = &res
	}
	return it
}

// finishedRow is what the batch update returns for one job.
type finishedRow struct {
	tenant, key    string
	dedupUS, ttlUS int64
}

// finishBatch finishes ps (distinct job ids) and returns the per-item errors.
func finishBatch(t *wtx, ps []*store.JobFinishParams, deps map[int64]bool) ([]error, error) {
	items := make([]finishItem, len(ps))
	for i, p := range ps {
		items[i] = newFinishItem(p)
	}
	blob, err := json.Marshal(items)
	if err != nil {
		return nil, fmt.Errorf("encode finishes: %w", err)
	}
	rows, err := t.query(qJobFinishBatch, string(blob))
	if err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
	}
	done := make(map[int64]finishedRow, len(ps))
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
	if len(done) > 0 {
		if _, err := t.exec(qAttemptEndBatch, string(blob)); err != nil {
			return nil, fmt.Errorf("end attempts: %w", err)
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
