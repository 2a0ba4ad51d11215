package idem

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/jsonrule"
	"github.com/idem-dev/idem/key"
	"github.com/idem-dev/idem/store"
)

// Limits on what may be enqueued.
const (
	MaxKeyLength   = 255               // idempotency and partition keys, kinds, queues, tenants
	MaxArgsBytes   = jsonrule.MaxBytes // args, metadata and result JSON (1 MiB)
	MaxBatch       = 1000              // jobs in one EnqueueMany
	MaxMaxAttempts = 1000
	MaxDependsOn   = 100
	MaxTimeout     = 7 * 24 * time.Hour // a job's own timeout
)

// EnqueueOpts are the per-job options of Enqueue; nil means every default.
type EnqueueOpts struct {
	Tenant       string    // default Config.Tenant
	Queue        string    // default DefaultQueue
	Priority     int       // higher runs first; default 0; MinPriority..MaxPriority
	MaxAttempts  int       // default Config.MaxAttempts
	RunAt        time.Time // not before; zero = now
	PartitionKey string    // FIFO partition within the queue
	DependsOn    []int64   // jobs that must complete first
	// DependsOnFinished makes the job wait until every DependsOn job has
	// finished whatever the outcome (completed, dead or cancelled) instead
	// of requiring them to complete: a dead or cancelled dependency does
	// not cancel it. A dependency cancelled while it ran counts once its
	// handler has returned or its lease has ended (its hold: Client.JobCancel).
	DependsOnFinished bool
	Metadata          json.RawMessage
	// IdempotencyKey deduplicates creation within the dedup window and
	// caches the result; "" = none.
	IdempotencyKey string
	// DedupWindow overrides Config.DedupWindow; a pointer to 0 means "only
	// while the job is unfinished".
	DedupWindow *time.Duration
	// ResultTTL overrides the result TTL for this job.
	ResultTTL *time.Duration
	// Retry is this job's own backoff policy, over the queue's and kind's.
	Retry *RetryPolicy
	// Timeout limits each attempt of this job, over the queue's and kind's
	// (Config.Timeout…): a Go handler's context is cancelled at the
	// deadline and a pull worker's lease never outlives it. 0 = the
	// queue's or kind's, if any. Stored with the job.
	Timeout time.Duration
}

// EnqueueParams is one untyped job: a kind and its JSON args.
type EnqueueParams struct {
	Kind string
	Args json.RawMessage
	Opts *EnqueueOpts
}

// EnqueueResult is the outcome of one enqueue.
type EnqueueResult struct {
	Job *JobRow
	// Existing: the idempotency key was in its dedup window, so no job was
	// created and Job is the one the key belongs to.
	Existing bool
	// Err is set, in EnqueueMany results only, when this item failed.
	Err error
}

// Enqueue inserts one typed job.
func (c *Client) Enqueue(ctx context.Context, args JobArgs, opts *EnqueueOpts) (*EnqueueResult, error) {
	if args == nil {
		return nil, idemtype.Invalid("args", "required (a JobArgs value)")
	}
	b, err := json.Marshal(args)
	if err != nil {
		return nil, idemtype.Invalid("args", "encode: %v", err)
	}
	return c.EnqueueRaw(ctx, EnqueueParams{Kind: args.Kind(), Args: b, Opts: opts})
}

// EnqueueRaw inserts one untyped job.
func (c *Client) EnqueueRaw(ctx context.Context, p EnqueueParams) (*EnqueueResult, error) {
	res, err := c.EnqueueMany(ctx, []EnqueueParams{p})
	if err != nil {
		return nil, err
	}
	if res[0].Err != nil {
		return nil, res[0].Err
	}
	return &res[0], nil
}

// EnqueueMany inserts a batch of jobs in one transaction. Input that fails
// validation fails the whole call with an error wrapping ErrInvalid and
// nothing is written; otherwise each result carries its own Err for what
// the store refused (a reused key, an unknown dependency) or for a
// delivery target named in its metadata that is a subscription's (an
// *idemtype.InvalidError on "metadata"), and the other jobs are written.
func (c *Client) EnqueueMany(ctx context.Context, items []EnqueueParams) ([]EnqueueResult, error) {
	return c.enqueueMany(ctx, items, c.store.JobInsertMany)
}

// insertFunc writes validated jobs: the store's JobInsertMany, or its
// JobInsertManyTx bound to the caller's transaction.
type insertFunc func(ctx context.Context, p *store.JobInsertManyParams) ([]store.JobInsertResult, error)

// enqueueMany is the one enqueue path of EnqueueMany and EnqueueTx:
// validation, defaults, fingerprints, the insert, and the result mapping.
func (c *Client) enqueueMany(ctx context.Context, items []EnqueueParams, insert insertFunc) ([]EnqueueResult, error) {
	if len(items) > MaxBatch {
		return nil, idemtype.Invalid("jobs", "batch of %d is over %d", len(items), MaxBatch)
	}
	return c.enqueueAll(ctx, items, insert, byCaller)
}

// jobSource is who makes a job, which decides what its validation lets
// through.
type jobSource uint8

const (
	// byCaller is the public API: every check.
	byCaller jobSource = iota
	// byFanOut is a topic's fan-out (Publish, EventReplay): its jobs
	// have the kinds of subscriptions (TopicKindPrefix).
	byFanOut
	// byReplay is JobReplay: its copies keep the kinds and metadata of
	// jobs made before, a subscription's delivery kind included.
	byReplay
)

// enqueueAll is enqueueMany without its MaxBatch cap: JobReplay writes all
// its copies with one insert, in one transaction. A job of src byCaller or
// byFanOut whose metadata names a subscription as its delivery target is
// refused in its result (a replay copies jobs as they are: such a copy is
// dead at delivery); a kind starting with TopicKindPrefix is refused
// unless src is byFanOut or byReplay.
func (c *Client) enqueueAll(ctx context.Context, items []EnqueueParams, insert insertFunc, src jobSource) ([]EnqueueResult, error) {
	if len(items) == 0 {
		return nil, nil
	}
	now := c.now()
	params := make([]*store.JobInsertParams, len(items))
	for i, it := range items {
		p, err := c.buildJob(it, now, true, src)
		if err != nil {
			if len(items) > 1 {
				err = fmt.Errorf("job %d: %w", i, err)
			}
			return nil, err
		}
		params[i] = p
	}
	var refused map[int]error
	if src != byReplay {
		var err error
		if refused, err = c.targets.namedSubscriptions(ctx, params); err != nil {
			return nil, fmt.Errorf("enqueue: %w", err)
		}
	}
	res, err := c.insertValid(ctx, params, refused, now, insert)
	if err != nil {
		return nil, err
	}
	out := make([]EnqueueResult, len(res))
	for i, r := range res {
		out[i] = EnqueueResult{Job: r.Job, Existing: r.Existing, Err: r.Err}
		if r.Err == nil && !r.Existing {
			c.wake(r.Job.Queue)
		}
		if r.Existing {
			c.stats.dedupHits.Add(1)
		}
		switch {
		case r.Err != nil:
		case r.Existing:
			c.logDuplicate(ctx, r.Job)
			c.observe(EventDeduplicated, r.Job, nil)
		default:
			c.observe(EventEnqueued, r.Job, nil)
		}
	}
	return out, nil
}

// insertValid inserts the jobs of params but those refused holds (by
// index) and returns the results of all, in order: a refused job's is its
// error, as the store's own refusals of one job (a reused key, an unknown
// dependency) are, and the others are written.
func (c *Client) insertValid(ctx context.Context, params []*store.JobInsertParams, refused map[int]error,
	now time.Time, insert insertFunc) ([]store.JobInsertResult, error) {
	jobs := params
	if len(refused) > 0 {
		jobs = make([]*store.JobInsertParams, 0, len(params)-len(refused))
		for i, p := range params {
			if refused[i] == nil {
				jobs = append(jobs, p)
			}
		}
	}
	var res []store.JobInsertResult
	if len(jobs) > 0 {
		var err error
		if res, err = insert(ctx, &store.JobInsertManyParams{Jobs: jobs, Now: now}); err != nil {
			return nil, fmt.Errorf("enqueue: %w", store.Classify(c.store, err))
		}
	}
	if len(refused) == 0 {
		return res, nil
	}
	out := make([]store.JobInsertResult, len(params))
	for i := range params {
		if refused[i] != nil {
			out[i].Err = refused[i]
			continue
		}
		out[i], res = res[0], res[1:]
	}
	return out, nil
}

// logDuplicate logs at debug an enqueue answered by job, the existing job
// of its key (seed 001's "returning existing job for idempotency key").
func (c *Client) logDuplicate(ctx context.Context, job *JobRow) {
	if !c.cfg.Logger.Enabled(ctx, slog.LevelDebug) {
		return
	}
	c.cfg.Logger.LogAttrs(ctx, slog.LevelDebug, "duplicate enqueue answered by the existing job",
		slog.String("key", job.IdempotencyKey), slog.String("tenant", job.Tenant), slog.Int64("job", job.ID),
		slog.String("state", string(job.State)), slog.String("kind", job.Kind), slog.String("queue", job.Queue),
		slog.Time("created_at", job.CreatedAt))
}

// ValidateEnqueue checks one job's input as EnqueueMany would, without
// writing anything. It returns an error wrapping ErrInvalid.
func (c *Client) ValidateEnqueue(p EnqueueParams) error {
	_, err := c.buildInsert(p, c.now(), false)
	return err
}

// insertParams validates one item of the public API, fills in defaults
// and fingerprints it.
func (c *Client) insertParams(it EnqueueParams, now time.Time) (*store.JobInsertParams, error) {
	return c.buildJob(it, now, true, byCaller)
}

// buildInsert is insertParams; the fingerprint (canonical JSON and SHA-256,
// the costly part) only when withFingerprint.
func (c *Client) buildInsert(it EnqueueParams, now time.Time, withFingerprint bool) (*store.JobInsertParams, error) {
	return c.buildJob(it, now, withFingerprint, byCaller)
}

// buildJob is buildInsert for a job made by src: a kind starting with
// TopicKindPrefix is refused unless src is byFanOut or byReplay.
func (c *Client) buildJob(it EnqueueParams, now time.Time, withFingerprint bool, src jobSource) (*store.JobInsertParams, error) {
	o := it.Opts
	if o == nil {
		o = &EnqueueOpts{}
	}
	p := &store.JobInsertParams{
		Tenant: o.Tenant, Queue: o.Queue, Kind: it.Kind, Args: it.Args,
		Priority: o.Priority, MaxAttempts: o.MaxAttempts, RunAt: o.RunAt,
		PartitionKey: o.PartitionKey, DependsOn: o.DependsOn, DependsOnFinished: o.DependsOnFinished,
		Metadata:       o.Metadata,
		IdempotencyKey: o.IdempotencyKey, DedupWindow: c.cfg.DedupWindow,
		ResultTTL: c.cfg.resultTTL(it.Kind), Timeout: o.Timeout,
	}
	setDefault(&p.Tenant, c.cfg.Tenant)
	setDefault(&p.Queue, DefaultQueue)
	setDefault(&p.MaxAttempts, c.cfg.MaxAttempts)
	if err := c.cfg.setAutoKey(p); err != nil {
		return nil, err
	}
	if len(p.Args) == 0 {
		p.Args = json.RawMessage("{}")
	}
	if o.DedupWindow != nil {
		p.DedupWindow = *o.DedupWindow
	}
	if o.ResultTTL != nil {
		p.ResultTTL = *o.ResultTTL
	}
	if err := validateInsert(p); err != nil {
		return nil, err
	}
	if src == byCaller && strings.HasPrefix(p.Kind, TopicKindPrefix) {
		// Delivery would match the job to a subscription by its kind and
		// sign its push with the subscription's secrets: a forged event.
		return nil, idemtype.Invalid("kind", "must not start with %q, which is reserved for the delivery jobs of topic subscriptions (publish an event to the topic instead)", TopicKindPrefix)
	}
	if o.Retry != nil {
		if err := o.Retry.validate(); err != nil {
			return nil, idemtype.Invalid("retry", "%v", err)
		}
		p.RetryPolicy, _ = json.Marshal(o.Retry) // durations and numbers always encode
	}
	if p.IdempotencyKey != "" && withFingerprint {
		fp, err := fingerprint(p, o.RunAt)
		if err != nil {
			return nil, err
		}
		p.Fingerprint = fp
	}
	if p.RunAt.IsZero() {
		p.RunAt = now
	}
	p.RunAt = p.RunAt.UTC()
	return p, nil
}

// validateInsert checks the fields of one job.
func validateInsert(p *store.JobInsertParams) error {
	for _, f := range []struct{ name, v string }{
		{"tenant", p.Tenant}, {"queue", p.Queue}, {"kind", p.Kind},
	} {
		if err := ValidateName(f.name, f.v); err != nil {
			return err
		}
	}
	if err := store.CheckInsertTenants([]*store.JobInsertParams{p}); err != nil {
		return err
	}
	if p.PartitionKey != "" {
		if err := ValidateKey("partition_key", p.PartitionKey); err != nil {
			return err
		}
	}
	if p.IdempotencyKey != "" {
		if err := ValidateKey("idempotency_key", p.IdempotencyKey); err != nil {
			return err
		}
	}
	if err := ValidateJSON("args", p.Args); err != nil {
		return err
	}
	if len(p.Metadata) > 0 {
		if err := ValidateJSON("metadata", p.Metadata); err != nil {
			return err
		}
		if !isJSONObject(p.Metadata) {
			return idemtype.Invalid("metadata", "must be a JSON object of at most %d bytes", MaxArgsBytes)
		}
	}
	if err := ValidatePriority(p.Priority); err != nil {
		return err
	}
	if p.MaxAttempts < 1 || p.MaxAttempts > MaxMaxAttempts {
		return idemtype.Invalid("max_attempts", "must be between 1 and %d", MaxMaxAttempts)
	}
	if p.Timeout < 0 || p.Timeout > MaxTimeout {
		return idemtype.Invalid("timeout", "must be between 0s and %v", MaxTimeout)
	}
	if p.DedupWindow < 0 || p.ResultTTL <= 0 {
		return idemtype.Invalid("dedup_window", "dedup_window must be >= 0 and result_ttl > 0")
	}
	if len(p.DependsOn) > MaxDependsOn {
		return idemtype.Invalid("depends_on", "at most %d dependencies", MaxDependsOn)
	}
	for _, id := range p.DependsOn {
		if id <= 0 {
			return idemtype.Invalid("depends_on", "job id %d is not valid", id)
		}
	}
	return nil
}

// ValidateName checks a tenant, queue, kind or worker id: 1–255 bytes of
// printable ASCII without spaces (0x21–0x7E).
func ValidateName(field, v string) error {
	if v == "" {
		return idemtype.Invalid(field, "must not be empty")
	}
	return validateASCII(field, v, 0x21, "must be printable ASCII without spaces")
}

// ValidateKey checks an idempotency or partition key: 1–255 bytes of
// printable ASCII, the space included (0x20–0x7E), as the HTTP API
// documents. A key outside that range (a control character, a byte of a
// multi-byte UTF-8 character) is an *idemtype.ValidationError naming field.
func ValidateKey(field, v string) error {
	return validateASCII(field, v, 0x20, "must be printable ASCII (0x20-0x7E)")
}

// validateASCII checks that v has 1 to MaxKeyLength bytes, each between low
// and 0x7E.
func validateASCII(field, v string, low byte, msg string) error {
	if len(v) == 0 || len(v) > MaxKeyLength {
		return idemtype.Invalid(field, "must be 1 to %d characters", MaxKeyLength)
	}
	for i := 0; i < len(v); i++ {
		if v[i] < low || v[i] > 0x7e {
			return idemtype.Invalid(field, "%s", msg)
		}
	}
	return nil
}

func isJSONObject(b json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(b, &m) == nil && m != nil
}

// fingerprint is the SHA-256 of the canonical JSON of the job fields that
// make "the same request" (API.md): run_at only when it was given. It
// writes the canonical document directly, its members in canonical
// order, canonicalizing only args and metadata: the same bytes as
// fingerprintOf's map through json.Marshal and key.Canonicalize, at a
// fraction of the cost (a keyed batch spent 40 % of its client CPU
// there). A string that is not valid UTF-8, which encoding/json repairs
// byte by byte, takes fingerprintOf.
func fingerprint(p *store.JobInsertParams, runAt time.Time) (string, error) {
	b := make([]byte, 0, 160+len(p.Args)+len(p.Metadata))
	args := p.Args
	if args == nil {
		args = json.RawMessage("null") // what encoding/json writes for a nil RawMessage (an empty one is an error)
	}
	b = append(b, `{"args":`...)
	b, err := key.AppendCanonical(b, args)
	if err != nil {
		return "", idemtype.Invalid("args", "canonical form: %v", err)
	}
	if len(p.DependsOn) > 0 {
		b = append(b, `,"depends_on":[`...)
		for i, id := range p.DependsOn {
			if i > 0 {
				b = append(b, ',')
			}
			b = key.AppendInt(b, id)
		}
		b = append(b, ']')
		if p.DependsOnFinished {
			b = append(b, `,"depends_on_finished":true`...)
		}
	}
	ok := true
	b = append(b, `,"kind":`...)
	b, ok = appendFPString(b, p.Kind, ok)
	b = append(b, `,"max_attempts":`...)
	b = key.AppendInt(b, int64(p.MaxAttempts))
	if !noMetadata(p.Metadata) {
		b = append(b, `,"metadata":`...)
		if b, err = key.AppendCanonical(b, p.Metadata); err != nil {
			return "", idemtype.Invalid("args", "canonical form: %v", err)
		}
	}
	b = append(b, `,"partition_key":`...)
	b, ok = appendFPString(b, p.PartitionKey, ok)
	b = append(b, `,"priority":`...)
	b = key.AppendInt(b, int64(p.Priority))
	b = append(b, `,"queue":`...)
	b, ok = appendFPString(b, p.Queue, ok)
	if !runAt.IsZero() {
		b = append(b, `,"run_at":"`...)
		b = runAt.UTC().AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	b = append(b, '}')
	if !ok {
		return fingerprintOf(p, runAt)
	}
	sum := sha256.Sum256(b)
	var h [2 * sha256.Size]byte
	hex.Encode(h[:], sum[:])
	return string(h[:]), nil // one allocation (hex.EncodeToString makes two)
}

// noMetadata reports whether metadata is absent, null or an empty object:
// all three mean "no metadata", so the fingerprint leaves the field out
// for each (as for absent metadata before: its fingerprints are unchanged).
func noMetadata(m json.RawMessage) bool {
	m = bytes.TrimSpace(m)
	if len(m) == 0 || string(m) == "null" {
		return true
	}
	return m[0] == '{' && len(bytes.TrimSpace(m[1:])) == 1 && m[len(m)-1] == '}'
}

// appendFPString appends s as a canonical JSON string while ok; it turns
// ok false (and appends nothing) at the first string that is not valid
// UTF-8.
func appendFPString(b []byte, s string, ok bool) ([]byte, bool) {
	if !ok {
		return b, false
	}
	return key.AppendString(b, s)
}

// fingerprintOf is fingerprint by its definition: the fields as a map,
// encoded by encoding/json (which replaces each invalid UTF-8 byte of a
// string with U+FFFD), canonicalized and hashed. fingerprint takes it for
// strings that are not valid UTF-8; the tests hold the two equal.
func fingerprintOf(p *store.JobInsertParams, runAt time.Time) (string, error) {
	fields := map[string]any{
		"queue": p.Queue, "kind": p.Kind, "args": p.Args, "priority": p.Priority,
		"max_attempts": p.MaxAttempts, "partition_key": p.PartitionKey,
		"depends_on": p.DependsOn, "metadata": p.Metadata,
	}
	if !runAt.IsZero() {
		fields["run_at"] = runAt.UTC().Format(time.RFC3339Nano)
	}
	if len(p.DependsOn) == 0 {
		delete(fields, "depends_on")
	} else if p.DependsOnFinished {
		fields["depends_on_finished"] = true
	}
	if noMetadata(p.Metadata) {
		delete(fields, "metadata")
	}
	b, err := key.CanonicalValue(fields)
	if err != nil {
		return "", idemtype.Invalid("args", "canonical form: %v", err)
	}
	return key.Hash(b)
}
