package idemclient

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Job is a job as the API renders it.
type Job struct {
	ID             string          `json:"id"`
	Tenant         string          `json:"tenant"`
	Queue          string          `json:"queue"`
	Kind           string          `json:"kind"`
	Args           json.RawMessage `json:"args"`
	State          string          `json:"state"`
	Priority       int             `json:"priority"`
	Attempt        int             `json:"attempt"`
	MaxAttempts    int             `json:"max_attempts"`
	RunAt          time.Time       `json:"run_at"`
	CreatedAt      time.Time       `json:"created_at"`
	StartedAt      *time.Time      `json:"started_at,omitempty"`
	FinishedAt     *time.Time      `json:"finished_at,omitempty"`
	PartitionKey   string          `json:"partition_key,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	DependsOn      []string        `json:"depends_on,omitempty"`
	Result         json.RawMessage `json:"result,omitempty"`
	WasCached      bool            `json:"was_cached"`
	OriginalJobID  string          `json:"original_job_id,omitempty"`
	LastError      string          `json:"last_error,omitempty"`
	Metadata       json.RawMessage `json:"metadata,omitempty"`
	WorkerID       string          `json:"worker_id,omitempty"`
	// LeaseToken and LeaseExpiresAt are set on claimed jobs.
	LeaseToken     string     `json:"lease_token,omitempty"`
	LeaseExpiresAt *time.Time `json:"lease_expires_at,omitempty"`
}

// EnqueueRequest is one job to enqueue. IdempotencyKey "" makes the client
// generate one per call, so its retries never create two jobs.
type EnqueueRequest struct {
	Queue          string
	Kind           string
	Args           json.RawMessage
	Priority       int
	RunAt          time.Time // zero = now
	MaxAttempts    int
	PartitionKey   string
	DependsOn      []string
	IdempotencyKey string
	DedupWindow    *time.Duration // nil = server default; 0 = only while unfinished
	ResultTTL      *time.Duration
	Metadata       json.RawMessage
}

// MarshalJSON renders the request in the API's form (durations as strings).
func (r *EnqueueRequest) MarshalJSON() ([]byte, error) {
	type wire struct {
		Queue          string          `json:"queue,omitempty"`
		Kind           string          `json:"kind"`
		Args           json.RawMessage `json:"args,omitempty"`
		Priority       int             `json:"priority,omitempty"`
		RunAt          *time.Time      `json:"run_at,omitempty"`
		MaxAttempts    int             `json:"max_attempts,omitempty"`
		PartitionKey   string          `json:"partition_key,omitempty"`
		DependsOn      []string        `json:"depends_on,omitempty"`
		IdempotencyKey string          `json:"idempotency_key,omitempty"`
		DedupWindow    string          `json:"dedup_window,omitempty"`
		ResultTTL      string          `json:"result_ttl,omitempty"`
		Metadata       json.RawMessage `json:"metadata,omitempty"`
	}
	w := wire{Queue: r.Queue, Kind: r.Kind, Args: r.Args, Priority: r.Priority, MaxAttempts: r.MaxAttempts,
		PartitionKey: r.PartitionKey, DependsOn: r.DependsOn, IdempotencyKey: r.IdempotencyKey, Metadata: r.Metadata}
	if !r.RunAt.IsZero() {
		t := r.RunAt.UTC()
		w.RunAt = &t
	}
	if r.DedupWindow != nil {
		w.DedupWindow = r.DedupWindow.String()
	}
	if r.ResultTTL != nil {
		w.ResultTTL = r.ResultTTL.String()
	}
	return json.Marshal(w)
}

// EnqueueResult is the reply of an enqueue.
type EnqueueResult struct {
	Job      *Job `json:"job"`
	Existing bool `json:"existing"`
	// Replayed: the server answered with the key's existing job
	// (Idempotent-Replayed: true).
	Replayed bool `json:"-"`
}

// Enqueue creates a job, or returns the existing job of its key.
func (cl *Client) Enqueue(ctx context.Context, req *EnqueueRequest) (*EnqueueResult, error) {
	body := *req
	key := body.IdempotencyKey
	body.IdempotencyKey = ""
	if key == "" {
		key = NewKey()
	}
	var out EnqueueResult
	var h http.Header
	if _, err := cl.do(ctx, &call{method: http.MethodPost, path: "/v1/jobs", body: &body, key: key, out: &out, header: &h}); err != nil {
		return nil, err
	}
	out.Replayed = h.Get("Idempotent-Replayed") == "true"
	return &out, nil
}

// BatchResult is one item of EnqueueBatch: a job or an error.
type BatchResult struct {
	Job      *Job   `json:"job,omitempty"`
	Existing bool   `json:"existing,omitempty"`
	Error    *Error `json:"error,omitempty"`
}

// EnqueueBatch enqueues up to 1,000 jobs; each item succeeds or fails alone.
// Items without a key get "<batch key>:<index>" on the server, so a retried
// batch creates nothing twice.
func (cl *Client) EnqueueBatch(ctx context.Context, reqs []*EnqueueRequest) ([]BatchResult, error) {
	var out struct {
		Results []BatchResult `json:"results"`
	}
	_, err := cl.do(ctx, &call{method: http.MethodPost, path: "/v1/jobs/batch",
		body: map[string]any{"jobs": reqs}, out: &out})
	return out.Results, err
}

// GetJob returns a job.
func (cl *Client) GetJob(ctx context.Context, id string) (*Job, error) {
	var out Job
	_, err := cl.do(ctx, &call{method: http.MethodGet, path: jobPath(id, ""), out: &out})
	return nilIfErr(&out, err)
}

func nilIfErr[T any](v *T, err error) (*T, error) {
	if err != nil {
		return nil, err
	}
	return v, nil
}

// Filter selects jobs (lists, replay, requeue).
type Filter struct {
	States         []string  `json:"state,omitempty"`
	Queue          string    `json:"queue,omitempty"`
	Kind           string    `json:"kind,omitempty"`
	PartitionKey   string    `json:"partition_key,omitempty"`
	IdempotencyKey string    `json:"idempotency_key,omitempty"`
	Since          time.Time `json:"-"`
	Until          time.Time `json:"-"`
}

// MarshalJSON renders the filter with optional times.
func (f Filter) MarshalJSON() ([]byte, error) {
	type plain Filter
	w := struct {
		plain
		Since *time.Time `json:"since,omitempty"`
		Until *time.Time `json:"until,omitempty"`
	}{plain: plain(f)}
	if !f.Since.IsZero() {
		w.Since = &f.Since
	}
	if !f.Until.IsZero() {
		w.Until = &f.Until
	}
	return json.Marshal(w)
}

// ListParams selects a page of jobs.
type ListParams struct {
	Filter
	Limit  int
	Cursor string
}

func (p *ListParams) query() url.Values {
	q := url.Values{}
	if p == nil {
		return q
	}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("state", strings.Join(p.States, ","))
	set("queue", p.Queue)
	set("kind", p.Kind)
	set("partition_key", p.PartitionKey)
	set("idempotency_key", p.IdempotencyKey)
	if !p.Since.IsZero() {
		set("since", p.Since.UTC().Format(time.RFC3339Nano))
	}
	if !p.Until.IsZero() {
		set("until", p.Until.UTC().Format(time.RFC3339Nano))
	}
	if p.Limit > 0 {
		set("limit", strconv.Itoa(p.Limit))
	}
	set("cursor", p.Cursor)
	return q
}

// JobPage is one page of a list.
type JobPage struct {
	Jobs       []*Job `json:"jobs"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// ListJobs returns a page of jobs, newest first.
func (cl *Client) ListJobs(ctx context.Context, p *ListParams) (*JobPage, error) {
	var out JobPage
	_, err := cl.do(ctx, &call{method: http.MethodGet, path: "/v1/jobs", query: p.query(), out: &out})
	return nilIfErr(&out, err)
}

// CancelJob cancels a job (ErrWrongState when it is finished).
func (cl *Client) CancelJob(ctx context.Context, id string) (*Job, error) {
	var out Job
	_, err := cl.do(ctx, &call{method: http.MethodPost, path: jobPath(id, "/cancel"), out: &out})
	return nilIfErr(&out, err)
}

// RetryJob makes a dead or cancelled job available again (scheduled when
// runAt is in the future; zero = now).
func (cl *Client) RetryJob(ctx context.Context, id string, runAt time.Time) (*Job, error) {
	body := map[string]any{}
	if !runAt.IsZero() {
		body["run_at"] = runAt.UTC()
	}
	var out Job
	_, err := cl.do(ctx, &call{method: http.MethodPost, path: jobPath(id, "/retry"), body: body, out: &out})
	return nilIfErr(&out, err)
}

// Attempt is one attempt of a job.
type Attempt struct {
	Attempt    int        `json:"attempt"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	DurationMS int64      `json:"duration_ms"`
	Outcome    string     `json:"outcome"`
	Error      string     `json:"error,omitempty"`
	Worker     string     `json:"worker,omitempty"`
	Target     string     `json:"target,omitempty"`
	HTTPStatus int        `json:"http_status,omitempty"`
}

// Attempts lists the attempts of a job, oldest first.
func (cl *Client) Attempts(ctx context.Context, id string) ([]*Attempt, error) {
	var out struct {
		Attempts []*Attempt `json:"attempts"`
	}
	_, err := cl.do(ctx, &call{method: http.MethodGet, path: jobPath(id, "/attempts"), out: &out})
	return out.Attempts, err
}

// Replay enqueues copies of the jobs the filter selects (into queue when
// not "") and returns how many.
func (cl *Client) Replay(ctx context.Context, f Filter, queue string) (int, error) {
	var out struct {
		Enqueued int `json:"enqueued"`
	}
	body := map[string]any{"filter": f}
	if queue != "" {
		body["queue"] = queue
	}
	_, err := cl.do(ctx, &call{method: http.MethodPost, path: "/v1/jobs/replay", body: body, out: &out})
	return out.Enqueued, err
}

// DLQList returns a page of dead jobs.
func (cl *Client) DLQList(ctx context.Context, p *ListParams) (*JobPage, error) {
	q := p.query()
	q.Del("state")
	var out JobPage
	_, err := cl.do(ctx, &call{method: http.MethodGet, path: "/v1/dlq", query: q, out: &out})
	return nilIfErr(&out, err)
}

// DLQRequeue makes dead jobs available again, by ids or (ids empty) by
// filter, and returns how many moved.
func (cl *Client) DLQRequeue(ctx context.Context, ids []string, f *Filter) (int, error) {
	body := map[string]any{}
	if len(ids) > 0 {
		body["ids"] = ids
	} else if f != nil {
		body["filter"] = f
	}
	var out struct {
		Requeued int `json:"requeued"`
	}
	_, err := cl.do(ctx, &call{method: http.MethodPost, path: "/v1/dlq/requeue", body: body, out: &out})
	return out.Requeued, err
}

// DLQDelete deletes a dead job with its attempts.
func (cl *Client) DLQDelete(ctx context.Context, id string) error {
	_, err := cl.do(ctx, &call{method: http.MethodDelete, path: "/v1/dlq/" + url.PathEscape(id)})
	return err
}

// ClaimRequest is a pull worker's claim.
type ClaimRequest struct {
	Queues   []string
	Kinds    []string
	WorkerID string
	Limit    int           // default 1
	Lease    time.Duration // default: the server's
	Wait     time.Duration // long poll, at most 60s
}

// Claim takes jobs with a lease; an empty slice when none came within Wait.
func (cl *Client) Claim(ctx context.Context, req *ClaimRequest) ([]*Job, error) {
	body := map[string]any{"queues": req.Queues, "worker_id": req.WorkerID}
	if len(req.Kinds) > 0 {
		body["kinds"] = req.Kinds
	}
	if req.Limit > 0 {
		body["limit"] = req.Limit
	}
	if req.Lease > 0 {
		body["lease"] = req.Lease.String()
	}
	if req.Wait > 0 {
		body["wait"] = req.Wait.String()
	}
	var out struct {
		Jobs []*Job `json:"jobs"`
	}
	_, err := cl.do(ctx, &call{method: http.MethodPost, path: "/v1/claim", body: body, out: &out})
	if err != nil {
		return nil, err
	}
	if out.Jobs == nil {
		out.Jobs = []*Job{}
	}
	return out.Jobs, nil
}

// Heartbeat extends a lease (lease 0 = the server's default) and returns
// its new expiry; ErrLeaseLost when it is gone.
func (cl *Client) Heartbeat(ctx context.Context, id, token string, lease time.Duration) (time.Time, error) {
	body := map[string]any{"lease_token": token}
	if lease > 0 {
		body["lease"] = lease.String()
	}
	var out struct {
		LeaseExpiresAt time.Time `json:"lease_expires_at"`
	}
	_, err := cl.do(ctx, &call{method: http.MethodPost, path: jobPath(id, "/heartbeat"), body: body, out: &out})
	return out.LeaseExpiresAt, err
}

// Complete records the success of a claimed job with its result (nil = none).
func (cl *Client) Complete(ctx context.Context, id, token string, result json.RawMessage) (*Job, error) {
	body := map[string]any{"lease_token": token}
	if len(result) > 0 {
		body["result"] = result
	}
	var out Job
	_, err := cl.do(ctx, &call{method: http.MethodPost, path: jobPath(id, "/complete"), body: body, out: &out})
	return nilIfErr(&out, err)
}

// FailRequest describes a failed attempt of a claimed job.
type FailRequest struct {
	Error string
	// NoRetry sends the job straight to the dead-letter queue.
	NoRetry bool
	// RetryAfter overrides the backoff when not nil (0 = claimable at once).
	RetryAfter *time.Duration
}

// Fail records a failed attempt of a claimed job.
func (cl *Client) Fail(ctx context.Context, id, token string, req *FailRequest) (*Job, error) {
	body := map[string]any{"lease_token": token, "error": req.Error}
	if req.NoRetry {
		body["retry"] = false
	}
	if req.RetryAfter != nil {
		body["retry_after"] = req.RetryAfter.String()
	}
	var out Job
	_, err := cl.do(ctx, &call{method: http.MethodPost, path: jobPath(id, "/fail"), body: body, out: &out})
	return nilIfErr(&out, err)
}

// Record is an idempotency record.
type Record struct {
	Key         string     `json:"key"`
	Status      string     `json:"status"`
	JobID       string     `json:"job_id,omitempty"`
	ResultHash  string     `json:"result_hash,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	CompletedAt *time.Time `json:"completed_at,omitempty"`
	DedupUntil  *time.Time `json:"dedup_until"`
	ExpiresAt   *time.Time `json:"expires_at"`
	SizeBytes   int64      `json:"size_bytes"`
}

// GetRecord returns the idempotency record of key.
func (cl *Client) GetRecord(ctx context.Context, key string) (*Record, error) {
	var out Record
	_, err := cl.do(ctx, &call{method: http.MethodGet, path: "/v1/idempotency/" + url.PathEscape(key), out: &out})
	return nilIfErr(&out, err)
}

// DeleteRecord deletes the idempotency record of key: the key may be used again.
func (cl *Client) DeleteRecord(ctx context.Context, key string) error {
	_, err := cl.do(ctx, &call{method: http.MethodDelete, path: "/v1/idempotency/" + url.PathEscape(key)})
	return err
}

// CacheStats summarises the idempotency records.
type CacheStats struct {
	Entries     int64   `json:"entries"`
	InProgress  int64   `json:"in_progress"`
	Expiring24h int64   `json:"expiring_24h"`
	Expired     int64   `json:"expired"`
	SizeBytes   int64   `json:"size_bytes"`
	Hits        int64   `json:"hits"`
	Misses      int64   `json:"misses"`
	HitRate     float64 `json:"hit_rate"`
}

// RecordStats returns the statistics of the idempotency records.
func (cl *Client) RecordStats(ctx context.Context) (*CacheStats, error) {
	var out CacheStats
	_, err := cl.do(ctx, &call{method: http.MethodGet, path: "/v1/idempotency", out: &out})
	return nilIfErr(&out, err)
}

// Percentiles of a latency in milliseconds.
type Percentiles struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
}

// QueueStats are the statistics of one queue.
type QueueStats struct {
	Counts              map[string]int64 `json:"counts"`
	OldestAvailableAgeS float64          `json:"oldest_available_age_s"`
	Completed1m         int64            `json:"completed_1m"`
	Failed1m            int64            `json:"failed_1m"`
	SuccessRate         *float64         `json:"success_rate"`
	WaitMS              Percentiles      `json:"wait_ms"`
	RunMS               Percentiles      `json:"run_ms"`
}

// Stats is the reply of GET /v1/stats.
type Stats struct {
	Queues      map[string]*QueueStats `json:"queues"`
	Idempotency *CacheStats            `json:"idempotency"`
}

// Stats returns queue and cache statistics.
func (cl *Client) Stats(ctx context.Context) (*Stats, error) {
	var out Stats
	_, err := cl.do(ctx, &call{method: http.MethodGet, path: "/v1/stats", out: &out})
	return nilIfErr(&out, err)
}

// Ready is the reply of /readyz.
type Ready struct {
	Status string                     `json:"status"`
	Checks map[string]json.RawMessage `json:"checks"`
}

// Ready returns the readiness of the server; an unhealthy server is an
// *Error with status 503 (and the reply is still returned).
func (cl *Client) Ready(ctx context.Context) (*Ready, error) {
	var out Ready
	_, err := cl.do(ctx, &call{method: http.MethodGet, path: "/readyz", out: &out})
	return &out, err
}

// Health returns nil while the server answers /healthz.
func (cl *Client) Health(ctx context.Context) error {
	_, err := cl.do(ctx, &call{method: http.MethodGet, path: "/healthz"})
	return err
}
