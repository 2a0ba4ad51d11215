package idemhttp

import (
	"encoding/json"
	"reflect"
	"strings"
	"time"

	"github.com/idem-dev/idem/idemtype"
)

// jobJSON is a job on the wire; ids are strings.
type jobJSON struct {
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
	LeaseToken     string          `json:"lease_token,omitempty"`
	LeaseExpiresAt *time.Time      `json:"lease_expires_at,omitempty"`
}

// renderJob converts a row; withLease includes the lease token (claims only).
func renderJob(j *idemtype.JobRow, withLease bool) *jobJSON {
	out := &jobJSON{
		ID: formatID(j.ID), Tenant: j.Tenant, Queue: j.Queue, Kind: j.Kind, Args: j.Args,
		State: string(j.State), Priority: j.Priority, Attempt: j.Attempt, MaxAttempts: j.MaxAttempts,
		RunAt: j.RunAt, CreatedAt: j.CreatedAt, StartedAt: j.StartedAt, FinishedAt: j.FinishedAt,
		PartitionKey: j.PartitionKey, IdempotencyKey: j.IdempotencyKey, Result: rawOrNil(j.Result),
		WasCached: j.WasCached, LastError: j.LastError, Metadata: rawOrNil(j.Metadata), WorkerID: j.WorkerID,
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
	return out
}

func renderJobs(rows []*idemtype.JobRow, withLease bool) []*jobJSON {
	out := make([]*jobJSON, 0, len(rows))
	for _, r := range rows {
		out = append(out, renderJob(r, withLease))
	}
	return out
}

// enqueueRequest is the body of POST /v1/jobs and one item of a batch.
type enqueueRequest struct {
	Queue          string          `json:"queue"`
	Kind           string          `json:"kind"`
	Args           json.RawMessage `json:"args"`
	Priority       int             `json:"priority"`
	RunAt          *string         `json:"run_at"`
	MaxAttempts    int             `json:"max_attempts"`
	PartitionKey   string          `json:"partition_key"`
	DependsOn      []jobIDText     `json:"depends_on"`
	IdempotencyKey string          `json:"idempotency_key"`
	DedupWindow    *string         `json:"dedup_window"`
	ResultTTL      *string         `json:"result_ttl"`
	Metadata       json.RawMessage `json:"metadata"`
}

// enqueueReply is the reply of an enqueue.
type enqueueReply struct {
	Job      *jobJSON `json:"job"`
	Existing bool     `json:"existing"`
}

// batchRequest is the body of POST /v1/jobs/batch.
type batchRequest struct {
	Jobs []json.RawMessage `json:"jobs"`
}

// batchItem is one result of a batch: a job or a problem.
type batchItem struct {
	Job      *jobJSON `json:"job,omitempty"`
	Existing *bool    `json:"existing,omitempty"`
	Error    *Problem `json:"error,omitempty"`
}

// filterJSON is the filter of replay and requeue bodies.
type filterJSON struct {
	State          stringList `json:"state"`
	Queue          string     `json:"queue"`
	Kind           string     `json:"kind"`
	PartitionKey   string     `json:"partition_key"`
	IdempotencyKey string     `json:"idempotency_key"`
	Since          *string    `json:"since"`
	Until          *string    `json:"until"`
}

// stringList accepts "a", "a,b" or ["a","b"].
type stringList []string

// UnmarshalJSON implements json.Unmarshaler.
func (l *stringList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*l = splitList([]string{one})
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return &json.UnmarshalTypeError{Value: "value", Type: stringListType, Field: "state"}
	}
	*l = splitList(many)
	return nil
}

type replayRequest struct {
	Filter filterJSON `json:"filter"`
	Queue  string     `json:"queue"`
}

type requeueRequest struct {
	IDs    []jobIDText `json:"ids"`
	Filter *filterJSON `json:"filter"`
}

type retryRequest struct {
	RunAt *string `json:"run_at"`
}

type claimRequest struct {
	Queues   []string `json:"queues"`
	Kinds    []string `json:"kinds"`
	WorkerID string   `json:"worker_id"`
	Limit    int      `json:"limit"`
	Lease    *string  `json:"lease"`
	Wait     *string  `json:"wait"`
}

type heartbeatRequest struct {
	LeaseToken string  `json:"lease_token"`
	Lease      *string `json:"lease"`
}

type completeRequest struct {
	LeaseToken string          `json:"lease_token"`
	Result     json.RawMessage `json:"result"`
}

type failRequest struct {
	LeaseToken string  `json:"lease_token"`
	Error      string  `json:"error"`
	Retry      *bool   `json:"retry"`
	RetryAfter *string `json:"retry_after"`
}

type attemptJSON struct {
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

type recordJSON struct {
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

func renderRecord(r *idemtype.Record) *recordJSON {
	out := &recordJSON{Key: r.Key, Status: string(r.Status), ResultHash: r.ResultHash, CreatedAt: r.CreatedAt,
		CompletedAt: r.CompletedAt, DedupUntil: r.DedupUntil, ExpiresAt: r.ExpiresAt, SizeBytes: r.SizeBytes}
	if r.JobID != 0 {
		out.JobID = formatID(r.JobID)
	}
	return out
}

type cacheStatsJSON struct {
	Entries     int64   `json:"entries"`
	InProgress  int64   `json:"in_progress"`
	Expiring24h int64   `json:"expiring_24h"`
	Expired     int64   `json:"expired"`
	SizeBytes   int64   `json:"size_bytes"`
	Hits        int64   `json:"hits"`
	Misses      int64   `json:"misses"`
	HitRate     float64 `json:"hit_rate"`
}

var stringListType = reflect.TypeOf("")

func splitList(in []string) []string {
	var out []string
	for _, s := range in {
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// jobIDText is a job id in a body: a JSON string (or number) kept as text
// and parsed strictly later.
type jobIDText string

// UnmarshalJSON implements json.Unmarshaler.
func (j *jobIDText) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*j = jobIDText(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return &json.UnmarshalTypeError{Value: "value", Type: stringListType}
	}
	*j = jobIDText(n.String())
	return nil
}
