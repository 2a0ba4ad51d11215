package idem

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/idem-dev/idem/idemtype"
)

// DefaultReplayLimit is the most jobs one JobReplay copies when Limit is 0.
const DefaultReplayLimit = 1000

// ReplayParams selects the jobs JobReplay copies.
type ReplayParams struct {
	// Filter selects the originals among the finished jobs (completed,
	// dead, cancelled; the unfinished jobs it selects are skipped, see
	// JobReplayReport); Filter.Tenant "" means the default tenant. Every
	// copy is made in the tenant of its original.
	Filter JobFilter
	// Queue, when not "", puts every copy in this queue.
	Queue string
	// Limit caps the copies; default DefaultReplayLimit.
	Limit int
	// Key, when not "", names this replay (idem serve passes the request's
	// Idempotency-Key): every copy gets the idempotency key ReplayCopyKey(Key,
	// original id), so a replay repeated with the same Key — after its
	// answer was lost, though its copies were committed — does not copy a
	// job twice: the copies it made are counted, not made again (within the
	// dedup window). The copies a replay of this Key made are never
	// originals of it, even when the filter selects them. A job the first
	// call skipped (unfinished) and that finished since is copied by the
	// repeat.
	Key string
}

// ReplayCopyKey is the idempotency key of the copy of job original made
// by the replay named key: "replay:", 32 hex digits of the SHA-256 of
// key, ":" and the original's id.
func ReplayCopyKey(key string, original int64) string {
	return replayKeyPrefix(key) + strconv.FormatInt(original, 10)
}

// replayKeyPrefix is what the keys of the copies made by the replay named
// key start with: "replay:", 32 hex digits of the SHA-256 of key and ":".
func replayKeyPrefix(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "replay:" + hex.EncodeToString(sum[:16]) + ":"
}

// JobReplayResult counts what a replay did.
type JobReplayResult struct {
	// Enqueued is how many copies the replay made (or, repeated with the
	// same ReplayParams.Key, counted: see ReplayParams.Key).
	Enqueued int
	// Skipped is how many unfinished jobs (pending, scheduled, available,
	// running, retryable) the filter selected that were not copied: each
	// will still run as itself (at most the replay's limit); and how many
	// finished jobs of the reserved kind prefix (TopicKindPrefix) it
	// selected that are not the delivery of an event of the log to a
	// subscription of its topic (a job enqueued under that kind before it
	// was refused; the delivery of an event retention deleted), which a
	// job replay never copies (EventReplay sends an event again).
	Skipped int
}

// replayStates are the states of the originals a replay copies: the
// finished ones of want (every finished state when want is empty), and
// the unfinished ones of want, which it skips.
func replayStates(want []JobState) (finished, unfinished []JobState) {
	if len(want) == 0 {
		want = idemtype.AllStates
	}
	for _, s := range want {
		if s.Finished() {
			finished = append(finished, s)
		} else {
			unfinished = append(unfinished, s)
		}
	}
	return finished, unfinished
}

// JobReplay is JobReplayReport's count of the copies made (Enqueued).
func (c *Client) JobReplay(ctx context.Context, p *ReplayParams) (int, error) {
	res, err := c.JobReplayReport(ctx, p)
	if res == nil {
		return 0, err
	}
	return res.Enqueued, err
}

// JobReplayReport enqueues a copy of every finished job (completed, dead
// or cancelled) the filter selects (up to Limit: then the newest Limit of
// them), oldest first, and returns how many it enqueued and how many
// unfinished jobs the filter selected that it skipped. An unfinished job
// is never copied: it still runs as itself, and a copy would run beside
// it (for a keyed job, its work twice). Replay it once it finished. A job
// whose kind starts with TopicKindPrefix is copied only when it is the
// delivery of an event of the log to a subscription of its topic that
// takes the event's type, as EventReplay would make it: its copy is
// pushed signed with the subscription's secrets. Others of that kind are
// skipped and counted in Skipped (see JobReplayResult.Skipped).
//
// A copy is a new job with
// the original's kind, args, priority, max attempts, partition key, own
// timeout and retry policy, and metadata plus metadata.replay_of = the
// original's id (a string); it has no dependencies, runs now, and has no
// idempotency key unless p.Key is set (see ReplayParams.Key).
//
// Every copy is validated before any is written: a copy that cannot be
// made (metadata that replay_of pushes over MaxArgsBytes) fails the call
// with an error wrapping ErrInvalid and nothing is copied. The copies are
// then written with one insert, in one transaction, whatever their number
// (Limit bounds it; it may exceed MaxBatch): a failure of the database
// leaves no copy, so a retry, with or without p.Key, copies each job once.
// Only an answer lost after the commit leaves the caller unsure; a retry
// with the same p.Key then counts the copies instead of making them again.
// A copy the store refuses on its own (its key, p.Key's, reused with
// another request) fails the call with that error and the count of the
// copies made.
func (c *Client) JobReplayReport(ctx context.Context, p *ReplayParams) (*JobReplayResult, error) {
	if p == nil {
		return nil, &InvalidError{Field: "params", Reason: "required (a replay needs its filter)"}
	}
	limit := p.Limit
	if limit <= 0 {
		limit = DefaultReplayLimit
	}
	if p.Queue != "" {
		if err := ValidateName("queue", p.Queue); err != nil {
			return nil, err
		}
	}
	if err := ValidateFilter(&p.Filter); err != nil {
		return nil, err
	}
	// The copies this replay made before (p.Key's): a repeat whose filter
	// selects them too (they keep the original's kind and queue) counts
	// them through their originals instead of copying them again, and
	// does not count them skipped while they wait to run.
	own := ""
	if p.Key != "" {
		own = replayKeyPrefix(p.Key)
	}
	finished, unfinished := replayStates(p.Filter.States)
	var originals []*JobRow
	if len(finished) > 0 {
		rows, err := c.replaySelect(ctx, p.Filter, finished, own, limit)
		if err != nil {
			return nil, err
		}
		originals = rows
	}
	res := &JobReplayResult{}
	originals, forged, err := c.replayable(ctx, originals)
	if err != nil {
		return nil, err
	}
	res.Skipped += forged
	if len(unfinished) > 0 {
		rows, err := c.replaySelect(ctx, p.Filter, unfinished, own, limit)
		if err != nil {
			return nil, err
		}
		res.Skipped += len(rows)
	}
	slices.Reverse(originals)
	copies := make([]EnqueueParams, len(originals))
	for i, o := range originals {
		meta, err := replayMetadata(o)
		if err != nil {
			return nil, err
		}
		q := o.Queue
		if p.Queue != "" {
			q = p.Queue
		}
		copies[i] = EnqueueParams{Kind: o.Kind, Args: o.Args, Opts: &EnqueueOpts{Tenant: o.Tenant, Queue: q,
			Priority: o.Priority, MaxAttempts: o.MaxAttempts, PartitionKey: o.PartitionKey, Metadata: meta,
			Timeout: o.Timeout, Retry: replayRetry(o)}}
		if p.Key != "" {
			copies[i].Opts.IdempotencyKey = ReplayCopyKey(p.Key, o.ID)
		}
		// Validated as an enqueue but for the kind: a copy of a
		// subscription's delivery job keeps its kind (TopicKindPrefix).
		if _, err := c.buildJob(copies[i], c.now(), false, byReplay); err != nil {
			return nil, fmt.Errorf("replay: copy of job %d: %w", o.ID, err)
		}
	}
	if len(copies) == 0 {
		return res, nil
	}
	out, err := c.enqueueAll(ctx, copies, c.store.JobInsertMany, byReplay)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	var refused error
	for _, r := range out {
		if r.Err != nil {
			refused = cmp.Or(refused, r.Err)
			continue
		}
		res.Enqueued++
	}
	if refused != nil {
		return res, fmt.Errorf("replay: %w", refused)
	}
	return res, nil
}

// replayable drops from originals the jobs of the reserved kind prefix
// that are not deliveries a topic replay would make (deliveryCheck), and
// returns the others and how many it dropped.
func (c *Client) replayable(ctx context.Context, originals []*JobRow) ([]*JobRow, int, error) {
	check := deliveryCheck{c: c}
	out := originals[:0]
	var dropped []int64
	for _, o := range originals {
		ok, err := check.genuine(ctx, o)
		if err != nil {
			return nil, 0, err
		}
		if !ok {
			dropped = append(dropped, o.ID)
			continue
		}
		out = append(out, o)
	}
	if len(dropped) > 0 {
		c.logger.Warn("replay skipped jobs of the reserved kind prefix that are no delivery of an event of the log",
			"prefix", TopicKindPrefix, "jobs", dropped)
	}
	return out, len(dropped), nil
}

// replaySelect lists the newest limit jobs f selects in states (f's own
// states replaced), newest first, without the copies whose key starts with
// own (when not "").
func (c *Client) replaySelect(ctx context.Context, f JobFilter, states []JobState, own string, limit int) ([]*JobRow, error) {
	lp := &JobListParams{Filter: f}
	lp.Filter.Tenant = c.tenant(lp.Filter.Tenant)
	lp.Filter.States = states
	var out []*JobRow
	for len(out) < limit {
		lp.Limit = min(limit-len(out), 500)
		rows, next, err := c.jobList(ctx, lp)
		if err != nil {
			return nil, fmt.Errorf("replay: list jobs: %w", err)
		}
		for _, r := range rows {
			if own == "" || !strings.HasPrefix(r.IdempotencyKey, own) {
				out = append(out, r)
			}
		}
		if next == 0 {
			break
		}
		lp.Cursor = next
	}
	return out, nil
}

// replayRetry is the original's own retry policy (nil when it has none,
// or one this version cannot read: the copy then takes the queue's or
// kind's, as the original would have).
func replayRetry(o *JobRow) *RetryPolicy {
	if len(o.RetryPolicy) == 0 {
		return nil
	}
	var p RetryPolicy
	if err := json.Unmarshal(o.RetryPolicy, &p); err != nil {
		return nil
	}
	return &p
}

// replayMetadata is the original's metadata with replay_of set.
func replayMetadata(o *JobRow) (json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if len(o.Metadata) > 0 && string(o.Metadata) != "null" {
		if err := json.Unmarshal(o.Metadata, &m); err != nil || m == nil {
			m = map[string]json.RawMessage{}
		}
	}
	m["replay_of"] = json.RawMessage(strconv.Quote(strconv.FormatInt(o.ID, 10)))
	return json.Marshal(m)
}
