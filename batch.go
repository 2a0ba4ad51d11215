package idem

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/key"
	"github.com/idem-dev/idem/store"
)

// Batches (seed 001): a batch and its jobs are created in one transaction
// under the batch's key, exactly once. A repeat of the key returns the
// batch as it is (Existing) and creates nothing, whatever jobs it lists.
// Each job's key derives from the batch key and the job's own key, or, when
// it has none, the SHA-256 of its canonical kind and args — never its
// position — so a job listed in another order is the same job.
//
// A batch may have a completion job (BatchCreateParams.OnFinish), created
// in the same transaction: it waits (pending, not claimable) until every
// job of the batch has finished — completed, dead or cancelled all count —
// and then becomes available, exactly once. Its metadata carries the
// batch id under "idem_batch_id"; its handler reads the children's
// outcomes with Client.FinishedBatch (counts by state and every job with
// its state, result and last error). See docs/batches.md.

// MaxBatchMetadata is the largest batch metadata accepted, in bytes.
const MaxBatchMetadata = 64 << 10

// BatchCreateParams describes one batch.
type BatchCreateParams struct {
	Tenant   string          // default Config.Tenant
	Key      string          // required: the batch's idempotency key
	Metadata json.RawMessage // a JSON object kept with the batch; nil = none
	// Jobs are the batch's jobs (1 to MaxBatch). Their Opts.Tenant is the
	// batch's; Opts.IdempotencyKey, when set, becomes part of the derived
	// key (BatchJobKey).
	Jobs []EnqueueParams
	// OnFinish, when set, is the batch's completion job: created with the
	// batch, run once every job of the batch has finished, whatever the
	// outcome. Its Opts.Tenant is the batch's; it takes no
	// IdempotencyKey (the batch key makes it once) and no DependsOn (it
	// depends on the batch's jobs).
	OnFinish *EnqueueParams
}

// Batch is a batch with its jobs, as BatchCreate, BatchGet and BatchCancel
// return it.
type Batch struct {
	ID        int64
	Tenant    string
	Key       string
	CreatedAt time.Time
	Metadata  json.RawMessage
	// Existing is set when BatchCreate found the batch already created.
	Existing bool
	// Counts are the jobs per state; Total their number.
	Counts map[JobState]int
	Total  int
	// Finished reports whether every job is completed, dead or cancelled
	// and none holds its cancel (JobRow.Held: cancelled while it ran, its
	// handler may still run): exactly when the completion job (OnFinish)
	// is released. Counts count a held job as cancelled; Held counts it.
	Finished bool
	// Held is the number of jobs cancelled while they ran whose handlers
	// may still run (JobRow.Held); Finished is false while it is not 0.
	Held int
	// Jobs are the batch's jobs, oldest first.
	Jobs []*JobRow
	// OnFinish is the batch's completion job (nil = none, or deleted
	// since it finished: retention, DLQ delete); it is not one of Jobs and
	// not counted.
	OnFinish *JobRow
}

// BatchJobKey returns the idempotency key of a batch's job: batchKey + "/"
// + the job's own key, or + "h" and the first 16 hex digits of the SHA-256
// of the canonical {"kind", "args"} when it has none. A key over
// MaxKeyLength is shortened to the SHA-256 of the batch key (32 hex digits)
// + "/" + the SHA-256 of the job part (32 hex digits).
func BatchJobKey(batchKey, jobKey, kind string, args json.RawMessage) (string, error) {
	part := jobKey
	if part == "" {
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		payload, err := json.Marshal(map[string]any{"kind": kind, "args": args})
		if err != nil {
			return "", fmt.Errorf("batch job key: %w", err)
		}
		h, err := key.Hash(payload)
		if err != nil {
			return "", idemtype.Invalid("args", "%v", err)
		}
		part = "h" + h[:16]
	}
	k := batchKey + "/" + part
	if len(k) <= MaxKeyLength {
		return k, nil
	}
	return key.Digest(batchKey)[:32] + "/" + key.Digest(part)[:32], nil
}

// BatchCreate creates the batch p.Key with its jobs in one transaction, or
// returns the existing batch (Existing) without creating anything. A job
// that cannot be created fails the whole batch: nothing is written.
func (c *Client) BatchCreate(ctx context.Context, p BatchCreateParams) (*Batch, error) {
	tenant := c.tenant(p.Tenant)
	params, err := c.batchParams(tenant, p)
	if err != nil {
		return nil, err
	}
	onFinish, err := c.onFinishParams(tenant, p.OnFinish)
	if err != nil {
		return nil, err
	}
	refused, err := c.targets.namedSubscriptions(ctx, append(params[:len(params):len(params)], onFinish))
	if err != nil {
		return nil, fmt.Errorf("batch %q: %w", p.Key, err)
	}
	for i := range len(params) + 1 { // the first refused, in order
		switch {
		case refused[i] == nil:
		case i == len(params):
			return nil, prefixField("on_finish.", refused[i])
		default:
			return nil, prefixField(fmt.Sprintf("jobs[%d].", i), refused[i])
		}
	}
	res, err := c.store.BatchCreate(ctx, &store.BatchCreateParams{Tenant: tenant, Key: p.Key,
		Metadata: p.Metadata, Jobs: params, OnFinish: onFinish, Now: c.now()})
	if err != nil {
		return nil, fmt.Errorf("batch %q: %w", p.Key, err)
	}
	if res.Existing {
		c.stats.dedupHits.Add(1)
		c.cfg.Logger.Info("batch already created", "key", p.Key, "tenant", tenant, "batch", res.Batch.ID)
	} else {
		for _, r := range res.Jobs {
			if r.Existing { // an item deduped onto a job that holds its key: nothing inserted
				c.stats.dedupHits.Add(1)
				c.observe(EventDeduplicated, r.Job, nil)
				continue
			}
			c.wake(r.Job.Queue)
			c.observe(EventEnqueued, r.Job, nil)
		}
		if res.OnFinish != 0 && onFinish != nil {
			c.observe(EventEnqueued, &JobRow{ID: res.OnFinish, Tenant: tenant, Queue: onFinish.Queue, Kind: onFinish.Kind}, nil)
		}
	}
	b, err := c.batchWithJobs(ctx, res.Batch)
	if err != nil {
		return nil, err
	}
	b.Existing = res.Existing
	return b, nil
}

// batchParams validates p and builds the insert params of its jobs.
func (c *Client) batchParams(tenant string, p BatchCreateParams) ([]*store.JobInsertParams, error) {
	if err := ValidateKey("key", p.Key); err != nil {
		return nil, err
	}
	if len(p.Jobs) == 0 || len(p.Jobs) > MaxBatch {
		return nil, idemtype.Invalid("jobs", "must hold 1 to %d jobs", MaxBatch)
	}
	if p.Metadata != nil && (len(p.Metadata) > MaxBatchMetadata || !isJSONObject(p.Metadata)) {
		return nil, idemtype.Invalid("metadata", "must be a JSON object of at most %d bytes", MaxBatchMetadata)
	}
	now := c.now()
	out := make([]*store.JobInsertParams, len(p.Jobs))
	for i, it := range p.Jobs {
		o := EnqueueOpts{}
		if it.Opts != nil {
			o = *it.Opts
		}
		k, err := BatchJobKey(p.Key, o.IdempotencyKey, it.Kind, it.Args)
		if err != nil {
			return nil, fmt.Errorf("jobs[%d]: %w", i, err)
		}
		o.Tenant, o.IdempotencyKey = tenant, k
		it.Opts = &o
		if out[i], err = c.insertParams(it, now); err != nil {
			return nil, prefixField(fmt.Sprintf("jobs[%d].", i), err)
		}
	}
	return out, nil
}

// onFinishParams validates a batch's completion job and builds its insert
// params (nil when there is none).
func (c *Client) onFinishParams(tenant string, it *EnqueueParams) (*store.JobInsertParams, error) {
	if it == nil {
		return nil, nil
	}
	o := EnqueueOpts{}
	if it.Opts != nil {
		o = *it.Opts
	}
	if o.IdempotencyKey != "" {
		return nil, idemtype.Invalid("on_finish.idempotency_key", "not allowed: the batch key creates the completion job once")
	}
	if len(o.DependsOn) > 0 {
		return nil, idemtype.Invalid("on_finish.depends_on", "not allowed: the completion job depends on the batch's jobs")
	}
	if len(o.Metadata) > 0 && isJSONObject(o.Metadata) {
		var m map[string]json.RawMessage
		if json.Unmarshal(o.Metadata, &m) == nil {
			if _, ok := m[store.BatchMetadataKey]; ok {
				return nil, idemtype.Invalid("on_finish.metadata", "%q is set by idem", store.BatchMetadataKey)
			}
		}
	}
	o.Tenant = tenant
	it2 := *it
	it2.Opts = &o
	jp, err := c.insertParams(it2, c.now())
	if err != nil {
		return nil, prefixField("on_finish.", err)
	}
	return jp, nil
}

// FinishedBatch returns the batch whose completion job is job (its
// metadata names it), with every job of the batch in its final state: what
// a completion job's handler reads to act on the children's outcomes.
// A job that is no batch's completion job is ErrNotFound.
func (c *Client) FinishedBatch(ctx context.Context, job *JobRow) (*Batch, error) {
	if job == nil {
		return nil, idemtype.Invalid("job", "required")
	}
	id, ok := BatchOf(job)
	if !ok {
		return nil, fmt.Errorf("job %d is no batch's completion job: %w", job.ID, idemtype.ErrNotFound)
	}
	b, err := c.BatchGet(ctx, job.Tenant, id)
	if err != nil {
		return nil, err
	}
	if b.OnFinish == nil || b.OnFinish.ID != job.ID {
		return nil, fmt.Errorf("job %d is no completion job of batch %d: %w", job.ID, id, idemtype.ErrNotFound)
	}
	return b, nil
}

// BatchOf returns the batch id a completion job's metadata carries
// ("idem_batch_id") and whether it has one.
func BatchOf(job *JobRow) (int64, bool) {
	if job == nil || len(job.Metadata) == 0 {
		return 0, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(job.Metadata, &m) != nil {
		return 0, false
	}
	var id int64
	if raw, ok := m[store.BatchMetadataKey]; !ok || json.Unmarshal(raw, &id) != nil || id <= 0 {
		return 0, false
	}
	return id, true
}

// prefixField puts prefix before the field of a validation error.
func prefixField(prefix string, err error) error {
	var inv *idemtype.InvalidError
	if errors.As(err, &inv) {
		return idemtype.Invalid(prefix+inv.Field, "%s", inv.Reason)
	}
	return err
}

// BatchGet returns the batch id with its jobs and their counts.
func (c *Client) BatchGet(ctx context.Context, tenant string, id int64) (*Batch, error) {
	b, err := c.store.BatchGet(ctx, &store.BatchGetParams{Tenant: c.tenant(tenant), ID: id})
	if err != nil {
		return nil, err
	}
	return c.batchWithJobs(ctx, b)
}

// BatchCancel cancels every unfinished job of the batch (running jobs have
// their handler context cancelled) and returns the batch. Finished jobs
// stay as they are; cancelling a finished batch changes nothing.
func (c *Client) BatchCancel(ctx context.Context, tenant string, id int64) (*Batch, error) {
	b, err := c.BatchGet(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	for _, j := range b.Jobs {
		if j.State.Finished() {
			continue
		}
		if _, err := c.JobCancel(ctx, b.Tenant, j.ID); err != nil && !errors.Is(err, ErrWrongState) {
			return nil, fmt.Errorf("cancel batch %d: %w", id, err)
		}
	}
	return c.BatchGet(ctx, tenant, id)
}

// batchWithJobs reads the jobs of b and counts them.
func (c *Client) batchWithJobs(ctx context.Context, b *idemtype.Batch) (*Batch, error) {
	out := &Batch{ID: b.ID, Tenant: b.Tenant, Key: b.Key, CreatedAt: b.CreatedAt, Metadata: b.Metadata,
		Counts: map[JobState]int{}, Finished: true}
	var cursor int64
	for {
		jobs, next, err := c.store.JobList(ctx, &store.JobListParams{
			Filter: store.JobFilter{Tenant: b.Tenant, BatchID: b.ID}, Limit: store.MaxListLimit, Cursor: cursor})
		if err != nil {
			return nil, fmt.Errorf("batch %d jobs: %w", b.ID, err)
		}
		out.Jobs = append(out.Jobs, jobs...)
		if next == 0 {
			break
		}
		cursor = next
	}
	for i, j := 0, len(out.Jobs)-1; i < j; i, j = i+1, j-1 {
		out.Jobs[i], out.Jobs[j] = out.Jobs[j], out.Jobs[i] // oldest first
	}
	for _, j := range out.Jobs {
		out.Counts[j.State]++
		if j.Held {
			out.Held++
		}
		// A job cancelled while it ran finishes for the completion job
		// when its handler has returned (or its lease ended): so it
		// does here.
		out.Finished = out.Finished && j.State.Finished() && !j.Held
	}
	out.Total = len(out.Jobs)
	if b.OnFinishJobID != 0 {
		j, err := c.store.JobGet(ctx, &store.JobGetParams{Tenant: b.Tenant, ID: b.OnFinishJobID})
		if errors.Is(err, idemtype.ErrNotFound) {
			// Deleted once finished (retention, DLQ delete): the batch
			// outlives it and shows none.
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("batch %d completion job: %w", b.ID, err)
		}
		out.OnFinish = j
	}
	return out, nil
}
