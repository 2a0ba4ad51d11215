package idemclient

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idem-dev/idem/idemhttp/wire"
	"github.com/idem-dev/idem/idemtype"
)

// Job is a job as the API renders it.
type Job = wire.Job

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
	DedupWindow    *time.Duration // nil = server default; 0 = only while unfinished; DedupForever = never reopens
	ResultTTL      *time.Duration
	Metadata       json.RawMessage
	// Timeout limits each attempt; nil = the queue's or kind's.
	Timeout *time.Duration
	// Retry is the job's own retry policy; nil = the queue's or kind's.
	Retry *RetryPolicy
}

// RetryPolicy is a job's own retry policy: the delay before retry n is
// Base·Factor^(n-1) capped at Max with ±Jitter, or Delays[n-1] (the last
// repeats). Zero fields take the server's defaults (5s, 2, 1h, 0.1). A Max
// below Base — each as written or defaulted, so a Base above 1h needs a
// Max — is refused by the server (ErrInvalid naming retry.max).
type RetryPolicy struct {
	MaxAttempts int // attempts in all; 0 = the job's MaxAttempts
	Base        time.Duration
	Factor      float64
	Max         time.Duration
	// Jitter is the ± fraction of random jitter: nil = default, 0 = none.
	Jitter *float64
	Delays []time.Duration
}

// wire renders the policy in the API's form.
func (p *RetryPolicy) wire() *wire.RetrySpec {
	if p == nil {
		return nil
	}
	out := &wire.RetrySpec{Jitter: p.Jitter}
	if p.MaxAttempts != 0 {
		n := p.MaxAttempts
		out.MaxAttempts = &n
	}
	if p.Base != 0 {
		out.Base = durationText(&p.Base)
	}
	if p.Max != 0 {
		out.Max = durationText(&p.Max)
	}
	if p.Factor != 0 {
		f := p.Factor
		out.Factor = &f
	}
	for _, d := range p.Delays {
		out.Delays = append(out.Delays, *durationText(&d))
	}
	return out
}

// MarshalJSON renders the request in the API's form (durations as strings).
func (r *EnqueueRequest) MarshalJSON() ([]byte, error) {
	return marshal(&wire.EnqueueRequest{Queue: r.Queue, Kind: r.Kind, Args: r.Args, Priority: r.Priority,
		RunAt: timeText(r.RunAt.UTC()), MaxAttempts: r.MaxAttempts, PartitionKey: r.PartitionKey,
		DependsOn: wire.JobIDs(r.DependsOn), IdempotencyKey: r.IdempotencyKey, DedupWindow: dedupWindowText(r.DedupWindow),
		ResultTTL: durationText(r.ResultTTL), Metadata: r.Metadata, Timeout: durationText(r.Timeout), Retry: r.Retry.wire()})
}

// EnqueueResult is the reply of an enqueue (the job, and Existing when it
// was already there).
type EnqueueResult struct {
	wire.EnqueueReply
	// Replayed: the server answered with the key's existing job
	// (Idempotent-Replayed: true).
	Replayed bool `json:"-"`
}

// Enqueue creates a job, or returns the existing job of its key. Args or
// metadata the server would refuse by its JSON rule (see Complete), and a
// key outside printable ASCII (0x20–0x7E), are refused before sending
// (ErrInvalid naming args, metadata or idempotency_key).
func (cl *Client) Enqueue(ctx context.Context, req *EnqueueRequest) (*EnqueueResult, error) {
	if err := req.checkDocuments(""); err != nil {
		return nil, fmt.Errorf("idemclient: enqueue: %w", err)
	}
	var body EnqueueRequest // nil: the server names what is missing
	if req != nil {
		body = *req
	}
	key := body.IdempotencyKey
	if err := checkHeaderKey("idempotency_key", key); err != nil {
		return nil, fmt.Errorf("idemclient: enqueue: %w", err)
	}
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

// BatchResult is one item of EnqueueBatch: a job or an error (the client's
// view of a wire.BatchItem).
type BatchResult struct {
	Job      *Job   `json:"job,omitempty"`
	Existing bool   `json:"existing,omitempty"`
	Error    *Error `json:"error,omitempty"`
}

// EnqueueBatch enqueues up to 1,000 jobs; each item succeeds or fails alone.
// Items without a key get "<batch key>:<index>" on the server, so a retried
// batch creates nothing twice. A nil item is sent as an empty request (its
// result is the server's refusal naming what is missing), never as null.
// An item whose args or metadata Enqueue would refuse before sending (not
// JSON, or refused by the server's JSON rule) is not sent: its result is
// that 400 problem, naming the field, and the other items are sent.
func (cl *Client) EnqueueBatch(ctx context.Context, reqs []*EnqueueRequest) ([]BatchResult, error) {
	jobs := nonNilJobs(reqs)
	send, sent, refused := checkBatchItems(jobs)
	if len(send) == 0 && len(jobs) > 0 {
		return refused, nil // nothing left to send
	}
	var out wire.BatchReply
	_, err := cl.do(ctx, &call{method: http.MethodPost, path: "/v1/jobs/batch",
		body: map[string]any{"jobs": send}, out: &out})
	if out.Results == nil {
		return nil, err
	}
	res := refused
	if res == nil { // every item was sent, in its place (sent is nil)
		res = make([]BatchResult, len(out.Results))
	}
	for k, it := range out.Results {
		i := k
		if sent != nil {
			if k >= len(sent) {
				break // more results than items: not this server's answer
			}
			i = sent[k]
		}
		res[i] = BatchResult{Job: it.Job, Existing: it.Existing != nil && *it.Existing, Error: (*Error)(it.Error)}
	}
	return res, err
}

// checkBatchItems applies checkDocuments to each job of a batch. With none
// refused it returns jobs as they are (send) and nil; else the jobs to
// send, the index of each in jobs (sent), and the results of all the
// items (refused), the refused ones holding their 400 problem (as the
// server answers a bad item) and the others left for the server's answer.
func checkBatchItems(jobs []*EnqueueRequest) (send []*EnqueueRequest, sent []int, refused []BatchResult) {
	for i, j := range jobs {
		err := j.checkDocuments("")
		var inv *idemtype.InvalidError
		if err == nil || !errors.As(err, &inv) {
			continue
		}
		if refused == nil {
			refused = make([]BatchResult, len(jobs))
		}
		refused[i].Error = &Error{Type: "/problems/invalid-request", Title: "Invalid request", Status: http.StatusBadRequest,
			Detail: inv.Field + ": " + inv.Reason, Errors: map[string]string{inv.Field: inv.Reason}}
	}
	if refused == nil {
		return jobs, nil, nil
	}
	for i, j := range jobs {
		if refused[i].Error == nil {
			send, sent = append(send, j), append(sent, i)
		}
	}
	return send, sent, refused
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
	ErrorCode      string    `json:"error_code,omitempty"`
	Resolved       *bool     `json:"resolved,omitempty"`
	Since          time.Time `json:"-"`
	Until          time.Time `json:"-"`
}

// MarshalJSON renders the filter in the API's form (times as RFC 3339).
func (f Filter) MarshalJSON() ([]byte, error) { return marshal(f.wire()) }

func (f *Filter) wire() *wire.Filter {
	return &wire.Filter{State: f.States, Queue: f.Queue, Kind: f.Kind, PartitionKey: f.PartitionKey,
		IdempotencyKey: f.IdempotencyKey, ErrorCode: f.ErrorCode, Resolved: f.Resolved,
		Since: timeText(f.Since), Until: timeText(f.Until)}
}

// timeText renders t as RFC 3339 (as time.Time does in JSON); nil when zero.
func timeText(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.Format(time.RFC3339Nano)
	return &s
}

// durationText renders d as a Go duration string; nil when nil.
func durationText(d *time.Duration) *string {
	if d == nil {
		return nil
	}
	s := d.String()
	return &s
}

// DedupForever is a dedup window that never reopens: seed 001 keeps its
// keys indefinitely. It equals idem.DedupForever (100 years); as an
// EnqueueRequest's DedupWindow it is sent as the API's "forever".
const DedupForever = 100 * 365 * 24 * time.Hour

// dedupForeverName is DedupForever's spelling in the API.
const dedupForeverName = "forever"

// dedupWindowText renders a dedup window as durationText does, and
// DedupForever as "forever".
func dedupWindowText(d *time.Duration) *string {
	if d != nil && *d == DedupForever {
		s := dedupForeverName
		return &s
	}
	return durationText(d)
}

// positiveDuration renders d as a Go duration string; nil unless positive.
func positiveDuration(d time.Duration) *string {
	if d <= 0 {
		return nil
	}
	return durationText(&d)
}

// ListParams selects a page of jobs.
type ListParams struct {
	Filter
	// FinishedSince lists only the jobs finished at or after it (query
	// finished_since); zero = no bound. A list parameter, not part of the
	// Filter that requeues and replays take.
	FinishedSince time.Time
	Limit         int
	Cursor        string
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
	set("error_code", p.ErrorCode)
	if p.Resolved != nil {
		set("resolved", strconv.FormatBool(*p.Resolved))
	}
	if !p.Since.IsZero() {
		set("since", p.Since.UTC().Format(time.RFC3339Nano))
	}
	if !p.Until.IsZero() {
		set("until", p.Until.UTC().Format(time.RFC3339Nano))
	}
	if !p.FinishedSince.IsZero() {
		set("finished_since", p.FinishedSince.UTC().Format(time.RFC3339Nano))
	}
	if p.Limit > 0 {
		set("limit", strconv.Itoa(p.Limit))
	}
	set("cursor", p.Cursor)
	return q
}

// JobPage is one page of a list.
type JobPage = wire.JobPage

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
	body := &wire.RetryRequest{RunAt: timeText(runAt.UTC())}
	var out Job
	_, err := cl.do(ctx, &call{method: http.MethodPost, path: jobPath(id, "/retry"), body: body, out: &out})
	return nilIfErr(&out, err)
}

// Attempt is one attempt of a job.
type Attempt = wire.Attempt

// Attempts lists the attempts of a job, oldest first.
func (cl *Client) Attempts(ctx context.Context, id string) ([]*Attempt, error) {
	var out wire.AttemptList
	_, err := cl.do(ctx, &call{method: http.MethodGet, path: jobPath(id, "/attempts"), out: &out})
	return out.Attempts, err
}

// Replay enqueues copies of the finished jobs the filter selects (into
// queue when not "") and returns how many (ReplayReport also tells the
// jobs it passed over).
func (cl *Client) Replay(ctx context.Context, f Filter, queue string) (int, error) {
	res, err := cl.ReplayReport(ctx, f, queue)
	return res.Enqueued, err
}

// ReplayResult is what a replay did: the copies it enqueued, and the
// jobs the filter selected that it did not copy (a replay copies
// completed, dead and cancelled jobs only, and of the reserved kind
// prefix "topic:" only deliveries of an event of the log: docs/topics.md).
type ReplayResult struct {
	Enqueued int
	Skipped  int
}

// ReplayReport is Replay with the count of the jobs skipped (see
// ReplayResult); its result is never nil.
func (cl *Client) ReplayReport(ctx context.Context, f Filter, queue string) (*ReplayResult, error) {
	var out wire.ReplayReply
	body := &wire.ReplayRequest{Filter: *f.wire(), Queue: queue}
	_, err := cl.do(ctx, &call{method: http.MethodPost, path: "/v1/jobs/replay", body: body, out: &out})
	return &ReplayResult{Enqueued: out.Enqueued, Skipped: out.Skipped}, err
}

// DLQList returns a page of dead jobs.
func (cl *Client) DLQList(ctx context.Context, p *ListParams) (*JobPage, error) {
	q := p.query()
	q.Del("state")
	var out JobPage
	_, err := cl.do(ctx, &call{method: http.MethodGet, path: "/v1/dlq", query: q, out: &out})
	return nilIfErr(&out, err)
}

// requeueBatch is the most ids one POST /v1/dlq/requeue takes.
const requeueBatch = 1000

// DLQRequeue makes dead jobs available again, by ids or (ids empty) by
// filter, and returns how many moved.
//
// Any number of ids may be given: they are sent oldest (lowest id) first,
// in requests of at most 1,000 ids (the most the server takes in one). A
// worker may claim between two requests, and a FIFO partition whose newer
// dead job came back before its older one would run them out of order.
// When a request fails after earlier ones succeeded, the count of the
// jobs already requeued is returned with the error. A requeue by filter
// is one request, of up to 1,000 jobs.
func (cl *Client) DLQRequeue(ctx context.Context, ids []string, f *Filter) (int, error) {
	if len(ids) == 0 {
		body := &wire.RequeueRequest{}
		if f != nil {
			body.Filter = f.wire()
		}
		return cl.dlqRequeue(ctx, body)
	}
	ids = oldestFirst(ids)
	total := 0
	for start := 0; start < len(ids); start += requeueBatch {
		chunk := ids[start:min(start+requeueBatch, len(ids))]
		n, err := cl.dlqRequeue(ctx, &wire.RequeueRequest{IDs: wire.JobIDs(chunk)})
		total += n
		if err != nil {
			if start > 0 {
				return total, fmt.Errorf("requeued %d jobs of the first %d ids (of %d), then: %w", total, start, len(ids), err)
			}
			return total, err
		}
	}
	return total, nil
}

// dlqRequeue sends one POST /v1/dlq/requeue.
func (cl *Client) dlqRequeue(ctx context.Context, body *wire.RequeueRequest) (int, error) {
	var out wire.RequeueReply
	_, err := cl.do(ctx, &call{method: http.MethodPost, path: "/v1/dlq/requeue", body: body, out: &out})
	return out.Requeued, err
}

// oldestFirst returns ids sorted by their number (job ids grow in enqueue
// order); ids that are not numbers keep their place at the end, for the
// server to refuse.
func oldestFirst(ids []string) []string {
	out := slices.Clone(ids)
	num := func(id string) (int64, bool) {
		n, err := strconv.ParseInt(id, 10, 64)
		return n, err == nil
	}
	slices.SortStableFunc(out, func(a, b string) int {
		na, oka := num(a)
		nb, okb := num(b)
		switch {
		case oka && okb:
			return cmp.Compare(na, nb)
		case oka:
			return -1
		case okb:
			return 1
		}
		return 0
	})
	return out
}

// DLQDelete deletes a dead job with its attempts.
//
// A retry after a lost reply that answers 404 reports success only when
// the job is gone (GET /v1/jobs/{id} answers 404 too): the earlier attempt
// may have deleted it, but the server also answers 404 for a job that is
// not dead (requeued meanwhile), which is then reported. ErrNotFound is
// otherwise reported only when the first attempt answers 404.
func (cl *Client) DLQDelete(ctx context.Context, id string) error {
	_, err := cl.do(ctx, &call{method: http.MethodDelete, path: "/v1/dlq/" + pathSegment(id),
		goneAt: "/v1/jobs/" + pathSegment(id)})
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
	res, err := cl.ClaimDetail(ctx, req)
	if err != nil {
		return nil, err
	}
	return res.Jobs, nil
}

// ClaimResult is the full answer of a claim.
type ClaimResult struct {
	Jobs []*Job // never nil
	// Throttled: a rate or concurrency limit held work back and nothing
	// was claimed.
	Throttled bool
	// NextAvailableAt is when the spent rate limit refills (zero when
	// unknown, as for a concurrency limit); RetryAfter is the same as a
	// duration from the server's answer.
	NextAvailableAt time.Time
	RetryAfter      time.Duration
}

// ClaimDetail is Claim that also reports throttling.
func (cl *Client) ClaimDetail(ctx context.Context, req *ClaimRequest) (*ClaimResult, error) {
	if req == nil {
		req = &ClaimRequest{} // the server names what is missing
	}
	body := &wire.ClaimRequest{Queues: req.Queues, Kinds: req.Kinds, WorkerID: req.WorkerID,
		Limit: max(req.Limit, 0), Lease: positiveDuration(req.Lease), Wait: positiveDuration(req.Wait)}
	var out wire.ClaimReply
	_, err := cl.do(ctx, &call{method: http.MethodPost, path: "/v1/claim", body: body, out: &out})
	if err != nil {
		return nil, err
	}
	res := &ClaimResult{Jobs: out.Jobs, Throttled: out.Throttled}
	if res.Jobs == nil {
		res.Jobs = []*Job{}
	}
	if out.NextAvailableAt != nil {
		res.NextAvailableAt = *out.NextAvailableAt
	}
	if out.RetryAfter != "" {
		if d, err := time.ParseDuration(out.RetryAfter); err == nil && d > 0 {
			res.RetryAfter = d
		}
	}
	return res, nil
}

// ClaimWait claims until jobs come or ctx ends, long-polling with
// req.Wait (30s when 0). When the server answers that a rate limit is
// spent, the next claim long-polls exactly until the budget returns (its
// retry_after; up to the server's 60s cap), so the worker neither polls in
// a loop nor misses work that other tenants enqueue meanwhile.
func (cl *Client) ClaimWait(ctx context.Context, req *ClaimRequest) ([]*Job, error) {
	var r ClaimRequest // nil: the server names what is missing
	if req != nil {
		r = *req
	}
	base := r.Wait
	if base <= 0 {
		base = 30 * time.Second
	}
	r.Wait = base
	for {
		res, err := cl.ClaimDetail(ctx, &r)
		if err != nil {
			return nil, err
		}
		if len(res.Jobs) > 0 {
			return res.Jobs, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		r.Wait = base
		if res.RetryAfter > 0 {
			r.Wait = min(res.RetryAfter+10*time.Millisecond, maxClaimWait)
		}
	}
}

// maxClaimWait is the server's cap on a claim's wait.
const maxClaimWait = 60 * time.Second

// Heartbeat extends a lease (lease 0 = the server's default) and returns
// its new expiry; ErrLeaseLost when it is gone.
func (cl *Client) Heartbeat(ctx context.Context, id, token string, lease time.Duration) (time.Time, error) {
	body := &wire.HeartbeatRequest{LeaseToken: token, Lease: positiveDuration(lease)}
	var out wire.HeartbeatReply
	_, err := cl.do(ctx, &call{method: http.MethodPost, path: jobPath(id, "/heartbeat"), body: body, out: &out})
	return out.LeaseExpiresAt, err
}

// Complete records the success of a claimed job with its result (nil =
// none). A result the server would refuse (the rule of idem.ValidateJSON:
// strict JSON, no repeated member name, numbers within the double range,
// at most idem.MaxJSONDepth deep and idem.MaxArgsBytes long) is refused
// before sending, with an *idemtype.InvalidError naming result (errors.Is
// ErrInvalid).
func (cl *Client) Complete(ctx context.Context, id, token string, result json.RawMessage) (*Job, error) {
	if err := checkDocument("result", result); err != nil {
		return nil, fmt.Errorf("idemclient: complete job %s: %w", id, err)
	}
	body := &wire.CompleteRequest{LeaseToken: token, Result: result}
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
	// ErrorCode is the failure's code (seed 004's error_code); "" = none.
	ErrorCode string
}

// Fail records a failed attempt of a claimed job; a nil req fails it
// without a message (retried by the policy).
func (cl *Client) Fail(ctx context.Context, id, token string, req *FailRequest) (*Job, error) {
	if req == nil {
		req = &FailRequest{} // a failure without a message, retried by the policy
	}
	body := &wire.FailRequest{LeaseToken: token, Error: req.Error, RetryAfter: durationText(req.RetryAfter),
		ErrorCode: req.ErrorCode}
	if req.NoRetry {
		no := false
		body.Retry = &no
	}
	var out Job
	_, err := cl.do(ctx, &call{method: http.MethodPost, path: jobPath(id, "/fail"), body: body, out: &out})
	return nilIfErr(&out, err)
}

// Record is an idempotency record.
type Record = wire.Record

// GetRecord returns the idempotency record of key.
func (cl *Client) GetRecord(ctx context.Context, key string) (*Record, error) {
	var out Record
	_, err := cl.do(ctx, &call{method: http.MethodGet, path: "/v1/idempotency/" + pathSegment(key), out: &out})
	return nilIfErr(&out, err)
}

// DeleteRecord deletes the idempotency record of key: the key may be used again.
// While the key is held (a live lease, or its job running) the server
// refuses with 409 idempotency-key-in-progress and keeps the record.
//
// It is sent once, never retried: once the first attempt has deleted the
// record, any enqueue with the key may create a new one, and a retry would
// delete that record, not the one meant. After a network error or a 5xx
// the caller cannot tell whether the record was deleted; GetRecord tells
// what is there now.
func (cl *Client) DeleteRecord(ctx context.Context, key string) error {
	_, err := cl.do(ctx, &call{method: http.MethodDelete, path: "/v1/idempotency/" + pathSegment(key), once: true})
	return err
}

// CacheStats summarises the idempotency records.
type CacheStats = wire.CacheStats

// RecordStats returns the statistics of the idempotency records.
func (cl *Client) RecordStats(ctx context.Context) (*CacheStats, error) {
	var out CacheStats
	_, err := cl.do(ctx, &call{method: http.MethodGet, path: "/v1/idempotency", out: &out})
	return nilIfErr(&out, err)
}

// Percentiles of a latency in milliseconds.
type Percentiles = wire.Percentiles

// QueueStats are the statistics of one queue.
type QueueStats = wire.QueueStats

// Stats is the reply of GET /v1/stats.
type Stats = wire.Stats

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
// *Error with status 503 (and the reply is still returned). It asks once,
// without the client's retries: a readiness probe reports the state of
// now, and its caller decides when to ask again.
func (cl *Client) Ready(ctx context.Context) (*Ready, error) {
	var out Ready
	_, err := cl.do(ctx, &call{method: http.MethodGet, path: "/readyz", out: &out, outOnError: true, once: true})
	return &out, err
}

// HealthReport is the reply of GET /v1/health: the job health checks of
// the client's tenant (of every tenant for an admin key without a tenant).
type HealthReport struct {
	Status string                 `json:"status"` // healthy, degraded or unhealthy
	Checks map[string]HealthCheck `json:"checks"`
}

// HealthCheck is one check of a HealthReport.
type HealthCheck struct {
	Status    string  `json:"status"` // healthy, degraded or unhealthy
	Value     float64 `json:"value"`
	Threshold float64 `json:"threshold"`
	Detail    string  `json:"detail,omitempty"`
}

// HealthChecks returns the job health checks of GET /v1/health (dead and
// waiting jobs, success and retry rates, the result cache). Unlike Ready
// it is served on the API listener. An unhealthy grade is answered 503:
// the report is returned with an *Error of status 503. It asks once,
// without the client's retries, as Ready does.
func (cl *Client) HealthChecks(ctx context.Context) (*HealthReport, error) {
	var out HealthReport
	_, err := cl.do(ctx, &call{method: http.MethodGet, path: "/v1/health", out: &out, outOnError: true, once: true})
	var e *Error
	if err != nil && (!errors.As(err, &e) || e.Status != http.StatusServiceUnavailable || out.Status == "") {
		return nil, err
	}
	return &out, err
}

// Health returns nil while the server answers /healthz.
func (cl *Client) Health(ctx context.Context) error {
	_, err := cl.do(ctx, &call{method: http.MethodGet, path: "/healthz"})
	return err
}
