// Package wire holds the JSON shapes of the HTTP API v1 (see API.md): the
// server (package idemhttp) writes replies and reads requests with them, the
// Go client (package idemclient) the other way round. It imports only the
// standard library, so the client does not pull in the server.
//
// Optional request fields carry omitempty, so a client leaves them out;
// decoding does not look at omitempty, so the server accepts them absent,
// null or set alike. Durations travel as Go duration strings ("30s") and
// times as RFC 3339 strings; the server parses and validates them.
package wire

import (
	"encoding/json"
	"reflect"
	"strings"
	"time"
)

// Job is a job as the API renders it; ids are strings.
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
	ErrorCode      string          `json:"error_code,omitempty"`      // latest failure's code
	ResolvedAt     *time.Time      `json:"resolved_at,omitempty"`     // dead job marked resolved
	ResolutionNote string          `json:"resolution_note,omitempty"` // note given when resolved
	Metadata       json.RawMessage `json:"metadata,omitempty"`
	WorkerID       string          `json:"worker_id,omitempty"`
	// Retry is the job's own retry policy as given at enqueue (absent =
	// the queue's or kind's).
	Retry *RetrySpec `json:"retry,omitempty"`
	// LeaseToken and LeaseExpiresAt are set on claimed jobs only.
	LeaseToken     string     `json:"lease_token,omitempty"`
	LeaseExpiresAt *time.Time `json:"lease_expires_at,omitempty"`
}

// JobPage is one page of a job list (GET /v1/jobs, GET /v1/dlq), and the
// reply of a claim (POST /v1/claim, never with a cursor).
type JobPage struct {
	Jobs       []*Job `json:"jobs"`
	NextCursor string `json:"next_cursor,omitempty"`
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

// AttemptList is the reply of GET /v1/jobs/{id}/attempts, oldest first.
type AttemptList struct {
	Attempts []*Attempt `json:"attempts"`
}

// Problem is an RFC 9457 problem detail, the body of every error reply.
type Problem struct {
	Type   string            `json:"type"`
	Title  string            `json:"title"`
	Status int               `json:"status"`
	Detail string            `json:"detail"`
	Errors map[string]string `json:"errors,omitempty"` // field → message, for validation
	// JobID names the job an idempotency key belongs to (422).
	JobID string `json:"job_id,omitempty"`
}

// Error implements error so server handlers can return a *Problem.
func (p *Problem) Error() string { return p.Title + ": " + p.Detail }

// EnqueueRequest is the body of POST /v1/jobs and one item of a batch.
type EnqueueRequest struct {
	Queue          string          `json:"queue,omitempty"`
	Kind           string          `json:"kind"`
	Args           json.RawMessage `json:"args,omitempty"`
	Priority       int             `json:"priority,omitempty"`
	RunAt          *string         `json:"run_at,omitempty"`
	MaxAttempts    int             `json:"max_attempts,omitempty"`
	PartitionKey   string          `json:"partition_key,omitempty"`
	DependsOn      []JobID         `json:"depends_on,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	DedupWindow    *string         `json:"dedup_window,omitempty"`
	ResultTTL      *string         `json:"result_ttl,omitempty"`
	Metadata       json.RawMessage `json:"metadata,omitempty"`
	// Timeout limits each attempt (Go duration); absent = the queue's or kind's.
	Timeout *string `json:"timeout,omitempty"`
	// Retry is the job's own retry policy; absent = the queue's or kind's.
	Retry *RetrySpec `json:"retry,omitempty"`
}

// RetrySpec is a job's own retry policy: how many attempts, and the delay
// before each retry — Base·Factor^(n-1) capped at Max with ±Jitter, or the
// explicit Delays (the last one repeats). Durations are Go durations
// ("60s", "1h") or whole seconds. Absent fields take the defaults (5s,
// factor 2, max 1h, jitter 0.1); jitter 0 means none.
type RetrySpec struct {
	MaxAttempts *int     `json:"max_attempts,omitempty"`
	Base        *string  `json:"base,omitempty"`
	Factor      *float64 `json:"factor,omitempty"`
	Max         *string  `json:"max,omitempty"`
	Jitter      *float64 `json:"jitter,omitempty"`
	Delays      []string `json:"delays,omitempty"`
}

// EnqueueReply is the reply of an enqueue.
type EnqueueReply struct {
	Job      *Job `json:"job"`
	Existing bool `json:"existing"`
}

// BatchRequest is the body of POST /v1/jobs/batch: EnqueueRequests, kept
// raw so that one malformed item fails only itself.
type BatchRequest struct {
	Jobs []json.RawMessage `json:"jobs"`
}

// BatchItem is one result of a batch: a job or a problem.
type BatchItem struct {
	Job      *Job     `json:"job,omitempty"`
	Existing *bool    `json:"existing,omitempty"`
	Error    *Problem `json:"error,omitempty"`
}

// BatchReply is the reply of POST /v1/jobs/batch, one item per job sent.
type BatchReply struct {
	Results []BatchItem `json:"results"`
}

// Filter is the filter of replay and requeue bodies.
type Filter struct {
	State          StringList `json:"state,omitempty"`
	Queue          string     `json:"queue,omitempty"`
	Kind           string     `json:"kind,omitempty"`
	PartitionKey   string     `json:"partition_key,omitempty"`
	IdempotencyKey string     `json:"idempotency_key,omitempty"`
	Since          *string    `json:"since,omitempty"`
	Until          *string    `json:"until,omitempty"`
	ErrorCode      string     `json:"error_code,omitempty"`
	Resolved       *bool      `json:"resolved,omitempty"`
}

// ReplayRequest is the body of POST /v1/jobs/replay.
type ReplayRequest struct {
	Filter Filter `json:"filter"`
	Queue  string `json:"queue,omitempty"`
}

// ReplayReply is the reply of POST /v1/jobs/replay: the copies made of
// the finished jobs the filter selected, and the unfinished jobs it
// selected that were not copied (at most the replay's limit).
type ReplayReply struct {
	Enqueued int `json:"enqueued"`
	Skipped  int `json:"skipped"`
}

// RequeueRequest is the body of POST /v1/dlq/requeue: ids or a filter.
type RequeueRequest struct {
	IDs    []JobID `json:"ids,omitempty"`
	Filter *Filter `json:"filter,omitempty"`
}

// RequeueReply is the reply of POST /v1/dlq/requeue.
type RequeueReply struct {
	Requeued int `json:"requeued"`
}

// RetryRequest is the (optional) body of POST /v1/jobs/{id}/retry.
type RetryRequest struct {
	RunAt *string `json:"run_at,omitempty"`
}

// ClaimRequest is the body of POST /v1/claim.
type ClaimRequest struct {
	Queues   []string `json:"queues"`
	Kinds    []string `json:"kinds,omitempty"`
	WorkerID string   `json:"worker_id"`
	Limit    int      `json:"limit,omitempty"`
	Lease    *string  `json:"lease,omitempty"`
	Wait     *string  `json:"wait,omitempty"`
}

// ClaimReply is the answer of POST /v1/claim. When a limit held work back
// and nothing was claimed, Throttled is true and, for a spent rate limit,
// NextAvailableAt and RetryAfter say when its budget returns (the response
// then also has a Retry-After header in whole seconds).
type ClaimReply struct {
	Jobs            []*Job     `json:"jobs"`
	Throttled       bool       `json:"throttled,omitempty"`
	NextAvailableAt *time.Time `json:"next_available_at,omitempty"`
	RetryAfter      string     `json:"retry_after,omitempty"`
}

// HeartbeatRequest is the body of POST /v1/jobs/{id}/heartbeat.
type HeartbeatRequest struct {
	LeaseToken string  `json:"lease_token"`
	Lease      *string `json:"lease,omitempty"`
}

// HeartbeatReply is the reply of a heartbeat.
type HeartbeatReply struct {
	LeaseExpiresAt time.Time `json:"lease_expires_at"`
}

// CompleteRequest is the body of POST /v1/jobs/{id}/complete.
type CompleteRequest struct {
	LeaseToken string          `json:"lease_token"`
	Result     json.RawMessage `json:"result,omitempty"`
}

// FailRequest is the body of POST /v1/jobs/{id}/fail.
type FailRequest struct {
	LeaseToken string  `json:"lease_token"`
	Error      string  `json:"error"`
	Retry      *bool   `json:"retry,omitempty"`
	RetryAfter *string `json:"retry_after,omitempty"`
	ErrorCode  string  `json:"error_code,omitempty"`
}

// ResolveRequest is the (optional) body of POST /v1/dlq/{id}/resolve.
type ResolveRequest struct {
	Note string `json:"note,omitempty"`
}

// Record is an idempotency record.
type Record struct {
	Key    string `json:"key"`
	Status string `json:"status"`
	// JobID is the latest job made with the key (a job served from the
	// cached result included).
	JobID string `json:"job_id,omitempty"`
	// ResultJobID is the job whose run produced the cached result; absent
	// while none is stored.
	ResultJobID string     `json:"result_job_id,omitempty"`
	ResultHash  string     `json:"result_hash,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	CompletedAt *time.Time `json:"completed_at,omitempty"`
	DedupUntil  *time.Time `json:"dedup_until"`
	ExpiresAt   *time.Time `json:"expires_at"`
	// ResultExpiresAt is when the cached result expires (completed_at +
	// result_ttl); absent while none is stored. It may come before
	// expires_at (a result TTL shorter than the dedup window): the record
	// then stays until its window ends without a result (size_bytes 0).
	ResultExpiresAt *time.Time `json:"result_expires_at,omitempty"`
	SizeBytes       int64      `json:"size_bytes"`
	// DurationMS is how long the run that stored the result took (seed
	// 000's duration_ms); absent until the record is completed.
	DurationMS *int64 `json:"duration_ms,omitempty"`
	// Result is the stored result, with ?include=result only.
	Result json.RawMessage `json:"result,omitempty"`
}

// CacheStats summarises the idempotency records.
type CacheStats struct {
	Entries     int64   `json:"entries"`
	InProgress  int64   `json:"in_progress"`
	Completed   int64   `json:"completed"`
	Failed      int64   `json:"failed"` // job dead or cancelled without a result
	Expiring24h int64   `json:"expiring_24h"`
	Expired     int64   `json:"expired"`
	SizeBytes   int64   `json:"size_bytes"`
	Hits        int64   `json:"hits"`
	Misses      int64   `json:"misses"`
	HitRate     float64 `json:"hit_rate"`
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
	// DeadUnresolved counts dead jobs not marked resolved.
	DeadUnresolved int64 `json:"dead_unresolved"`
	// SuccessRate over the last minute; null when nothing finished.
	SuccessRate *float64    `json:"success_rate"`
	WaitMS      Percentiles `json:"wait_ms"`
	RunMS       Percentiles `json:"run_ms"`
}

// Stats is the reply of GET /v1/stats.
type Stats struct {
	Queues      map[string]*QueueStats `json:"queues"`
	Idempotency *CacheStats            `json:"idempotency"`
	// Limits in force for the caller's tenant (every limit for an admin
	// key) with their usage and throttling counts.
	Limits []Limit `json:"limits"`
	// Paused queues and tenants' work in queues.
	Paused []PausedScope `json:"paused"`
	// Targets are the caller's tenant's delivery targets with attempts in
	// the last hour, by name; absent in the all_tenants view.
	Targets map[string]*TargetStats `json:"targets,omitempty"`
	// TargetsByTenant is the all_tenants view's Targets: every tenant's
	// targets with attempts in the last hour, by tenant then name (targets
	// are per tenant; two tenants may each have one of a name).
	TargetsByTenant map[string]map[string]*TargetStats `json:"targets_by_tenant,omitempty"`
	// Kinds summarises the jobs of each kind created in the last 24 hours
	// (seed 004's job health per function), counting every one of them.
	Kinds map[string]*KindStats `json:"kinds"`
}

// KindStats summarises the jobs of one kind created in the last 24 hours.
type KindStats struct {
	Count int64 `json:"count"`
	// States counts the jobs per state (seed 002's stats by action and
	// status), every state present, like QueueStats.Counts.
	States        map[string]int64 `json:"states"`
	AvgDurationMS float64          `json:"avg_duration_ms"`
	MaxDurationMS float64          `json:"max_duration_ms"`
	Retried       int64            `json:"retried"`
	Failed24h     int64            `json:"failed_24h"`
}

// TargetStats are the recent delivery attempts of one target.
type TargetStats struct {
	Attempts    int            `json:"attempts"`
	Completed   int            `json:"completed"`
	Retried     int            `json:"retried"`
	Dead        int            `json:"dead"`
	SuccessRate float64        `json:"success_rate"`
	LatencyMS   Percentiles    `json:"latency_ms"`
	Statuses    map[string]int `json:"statuses"`
}

// StringList is a list that decodes from "a", "a,b" or ["a","b"] (white
// space around an item dropped) and encodes as an array. A list with an
// empty item ("", "a,", ["a",""]) or none ([]) names nothing: decoding it
// fails with an *json.UnmarshalTypeError whose Value is EmptyListItem
// (dropping the items took "state": "" for every state). null is absent.
type StringList []string

// EmptyListItem is the Value of the *json.UnmarshalTypeError of a
// StringList with an empty item or none.
const EmptyListItem = "a list with an empty item"

// UnmarshalJSON implements json.Unmarshaler.
func (l *StringList) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var items []string
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		items = []string{one}
	} else if err := json.Unmarshal(b, &items); err != nil {
		return &json.UnmarshalTypeError{Value: "value", Type: stringType, Field: "state"}
	}
	out := SplitList(items)
	if len(out) == 0 || len(out) != countItems(items) {
		return &json.UnmarshalTypeError{Value: EmptyListItem, Type: stringType}
	}
	*l = out
	return nil
}

// countItems counts the comma-separated items of in, empty ones included.
func countItems(in []string) int {
	n := 0
	for _, s := range in {
		n += strings.Count(s, ",") + 1
	}
	return n
}

// SplitList splits comma-separated items and drops blank ones.
func SplitList(in []string) []string {
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

// JobID is a job id in a body: a JSON string (or number) kept as text, for
// the server to parse strictly later. It encodes as a string.
type JobID string

// JobIDs converts ids to JobIDs (nil for none).
func JobIDs(ids []string) []JobID {
	if len(ids) == 0 {
		return nil
	}
	out := make([]JobID, len(ids))
	for i, id := range ids {
		out[i] = JobID(id)
	}
	return out
}

// UnmarshalJSON implements json.Unmarshaler.
func (j *JobID) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*j = JobID(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return &json.UnmarshalTypeError{Value: "value", Type: stringType}
	}
	*j = JobID(n.String())
	return nil
}

var stringType = reflect.TypeOf("")

// TargetPut is the body of PUT /v1/targets/{name}.
type TargetPut struct {
	URL   string `json:"url"`
	Queue string `json:"queue,omitempty"`
	Kind  string `json:"kind,omitempty"`
	// Secrets sign each push (whsec_…), the first listed first, replacing
	// the stored ones. Omitted: a secret is generated and returned once
	// when the PUT creates the target; a PUT that replaces it keeps its
	// secrets (a repeated PUT never rotates them). [] sends unsigned pushes.
	Secrets *[]string `json:"secrets,omitempty"`
	Timeout *string   `json:"timeout,omitempty"` // a Go duration; default the server's
}

// Target is a delivery target as the API shows it: never its secrets.
type Target struct {
	Name        string    `json:"name"`
	URL         string    `json:"url"`
	Queue       string    `json:"queue,omitempty"`
	Kind        string    `json:"kind,omitempty"`
	SecretCount int       `json:"secret_count"`
	Timeout     string    `json:"timeout,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
	// Secret is the generated signing secret, in the reply that created it
	// only (a PUT that replaced the target kept its secrets).
	Secret string `json:"secret,omitempty"`
}

// TargetList is the reply of GET /v1/targets.
type TargetList struct {
	Targets []*Target `json:"targets"`
}

// SubscriptionPut is the body of PUT /v1/topics/{topic}/subscriptions/{name}.
type SubscriptionPut struct {
	URL string `json:"url"`
	// Secret signs each push (whsec_…), replacing the stored ones.
	// Omitted: one is generated and returned once when the PUT creates the
	// subscription; a PUT that replaces it keeps its secrets (a repeated
	// PUT never rotates them). "" sends unsigned pushes.
	Secret *string `json:"secret,omitempty"`
	// Kinds: only events of these types are delivered; none = every event.
	Kinds []string `json:"kinds,omitempty"`
	// EventTypes is the former name of Kinds, still accepted; when both
	// are given they must hold the same types.
	EventTypes []string `json:"event_types,omitempty"`
	// MaxAttempts is the number of attempts of each delivery job made for
	// the subscription, 1 to 1000; omitted = the server's default.
	MaxAttempts int     `json:"max_attempts,omitempty"`
	Timeout     *string `json:"timeout,omitempty"`
}

// Subscription is a subscription as the API shows it: never its secret.
type Subscription struct {
	Topic string `json:"topic"`
	Name  string `json:"name"`
	URL   string `json:"url"` // a password in it is masked
	// Kinds: the event types delivered; empty = every event.
	Kinds []string `json:"kinds"`
	// EventTypes repeats Kinds under its former name (omitted when empty).
	EventTypes []string `json:"event_types,omitempty"`
	// MaxAttempts is the number of attempts of each delivery job.
	MaxAttempts int       `json:"max_attempts"`
	SecretCount int       `json:"secret_count"`
	Timeout     string    `json:"timeout,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
	Secret      string    `json:"secret,omitempty"` // generated, in the creating reply only
}

// SubscriptionList is the reply of GET /v1/topics/{topic}/subscriptions.
type SubscriptionList struct {
	Subscriptions []*Subscription `json:"subscriptions"`
}

// PublishRequest is the body of POST /v1/topics/{topic}/events.
type PublishRequest struct {
	Key          string          `json:"key,omitempty"`
	Type         string          `json:"type,omitempty"`
	PartitionKey string          `json:"partition_key,omitempty"`
	Payload      json.RawMessage `json:"payload"`
	Metadata     json.RawMessage `json:"metadata,omitempty"`
}

// PublishReply is the reply of POST /v1/topics/{topic}/events.
type PublishReply struct {
	EventID    string `json:"event_id"`
	Deliveries int    `json:"deliveries"`
	Existing   bool   `json:"existing"`
}

// Event is one event of the event log.
type Event struct {
	ID           string          `json:"id"`
	Topic        string          `json:"topic"`
	Key          string          `json:"key,omitempty"`
	Type         string          `json:"type,omitempty"`
	PartitionKey string          `json:"partition_key,omitempty"`
	Payload      json.RawMessage `json:"payload"`
	Metadata     json.RawMessage `json:"metadata,omitempty"`
	CreatedAt    time.Time       `json:"created_at"`
	// Deliveries is how many subscriptions the event reached when published.
	Deliveries int `json:"deliveries"`
}

// EventList is the reply of GET /v1/topics/{topic}/events.
type EventList struct {
	Events     []*Event `json:"events"`
	NextCursor string   `json:"next_cursor,omitempty"`
}

// EventReplayRequest is the body of POST /v1/topics/{topic}/replay.
type EventReplayRequest struct {
	PartitionKey string            `json:"partition_key,omitempty"`
	Types        []string          `json:"types,omitempty"`
	Metadata     map[string]string `json:"metadata,omitempty"` // at most one key: value
	From         *string           `json:"from,omitempty"`
	To           *string           `json:"to,omitempty"`
	Subscription string            `json:"subscription,omitempty"`
}

// EventReplayReply counts a replay.
type EventReplayReply struct {
	Events     int `json:"events"`
	Deliveries int `json:"deliveries"`
}
