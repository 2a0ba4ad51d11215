package idem

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
// A batch has no completion job of its own: a caller that needs one
// enqueues it with DependsOn on every job of the batch (it runs when all
// completed; a failed job cancels it). Running "even if some failed" is not
// supported yet.

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
	// Finished reports whether every job is completed, dead or cancelled.
	Finished bool
	// Jobs are the batch's jobs, oldest first.
	Jobs []*JobRow
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
	return shortHex(batchKey) + "/" + shortHex(part), nil
}

func shortHex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:16])
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
	res, err := c.store.BatchCreate(ctx, &store.BatchCreateParams{Tenant: tenant, Key: p.Key,
		Metadata: p.Metadata, Jobs: params, Now: c.now()})
	if err != nil {
		return nil, fmt.Errorf("batch %q: %w", p.Key, err)
	}
	if res.Existing {
		c.stats.dedupHits.Add(1)
		c.cfg.Logger.Info("batch already created", "key", p.Key, "tenant", tenant, "batch", res.Batch.ID)
	} else {
		for _, r := range res.Jobs {
			c.wake(r.Job.Queue)
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
		out.Finished = out.Finished && j.State.Finished()
	}
	out.Total = len(out.Jobs)
	return out, nil
}
