package idemclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/idem-dev/idem/idemhttp/wire"
)

// Batch is a batch with its jobs and their counts.
type Batch = wire.Batch

// BatchCreateResult is the reply of BatchCreate.
type BatchCreateResult = wire.BatchCreateReply

// BatchCreate creates the batch key with jobs in one transaction, or returns
// the existing batch (Existing) when the key was used before. Each job's
// IdempotencyKey, when set, is its own part of the derived key. A batch
// needs a key: "" is refused (ErrInvalid), and so is one outside printable
// ASCII (0x20–0x7E), before sending. A nil job is sent as an empty
// request, which the server refuses naming what is missing (not as null).
func (cl *Client) BatchCreate(ctx context.Context, key string, metadata json.RawMessage, jobs []*EnqueueRequest) (*BatchCreateResult, error) {
	return cl.BatchCreateWith(ctx, &BatchCreateRequest{Key: key, Metadata: metadata, Jobs: jobs})
}

// BatchCreateRequest is a batch to create with BatchCreateWith.
type BatchCreateRequest struct {
	Key      string
	Metadata json.RawMessage
	Jobs     []*EnqueueRequest
	// OnFinish is the batch's completion job: created with the batch, run
	// once every job has finished whatever the outcome. Its metadata gets
	// "idem_batch_id"; it reads the outcomes with BatchGet.
	OnFinish *EnqueueRequest
}

// BatchCreateWith is BatchCreate with every option, a completion job
// included.
func (cl *Client) BatchCreateWith(ctx context.Context, req *BatchCreateRequest) (*BatchCreateResult, error) {
	if req == nil {
		req = &BatchCreateRequest{} // the server names what is missing
	}
	if err := checkHeaderKey("key", req.Key); err != nil {
		return nil, fmt.Errorf("idemclient: create batch %q: %w", req.Key, err)
	}
	if err := req.checkBatch(); err != nil {
		return nil, fmt.Errorf("idemclient: create batch %q: %w", req.Key, err)
	}
	var out BatchCreateResult
	body := map[string]any{"key": req.Key, "jobs": nonNilJobs(req.Jobs)}
	if req.Metadata != nil {
		body["metadata"] = req.Metadata
	}
	if req.OnFinish != nil {
		body["on_finish"] = req.OnFinish
	}
	// The key travels in the body and, repeated, as the header. Without
	// one no header is made up either: the server refuses a batch without
	// a key (a random one would make a batch once per key no one knows).
	_, err := cl.do(ctx, &call{method: http.MethodPost, path: "/v1/batches", body: body, key: req.Key,
		bodyKey: req.Key == "", out: &out})
	return nilIfErr(&out, err)
}

// BatchGet returns a batch with its jobs.
func (cl *Client) BatchGet(ctx context.Context, id string) (*Batch, error) {
	var out Batch
	_, err := cl.do(ctx, &call{method: http.MethodGet, path: "/v1/batches/" + pathSegment(id), out: &out})
	return nilIfErr(&out, err)
}

// BatchCancel cancels every unfinished job of a batch.
func (cl *Client) BatchCancel(ctx context.Context, id string) (*Batch, error) {
	var out Batch
	_, err := cl.do(ctx, &call{method: http.MethodPost, path: "/v1/batches/" + pathSegment(id) + "/cancel", out: &out})
	return nilIfErr(&out, err)
}

// DLQResolve marks a dead job resolved with note; it stays dead, kept for
// audit, out of the unresolved count.
func (cl *Client) DLQResolve(ctx context.Context, id, note string) (*Job, error) {
	var out Job
	_, err := cl.do(ctx, &call{method: http.MethodPost, path: "/v1/dlq/" + pathSegment(id) + "/resolve",
		body: &wire.ResolveRequest{Note: note}, out: &out})
	return nilIfErr(&out, err)
}

// GetRecordResult returns the idempotency record of key with its stored
// result (?include=result).
func (cl *Client) GetRecordResult(ctx context.Context, key string) (*Record, error) {
	var out Record
	_, err := cl.do(ctx, &call{method: http.MethodGet, path: "/v1/idempotency/" + pathSegment(key),
		query: url.Values{"include": {"result"}}, out: &out})
	return nilIfErr(&out, err)
}

// Lease is the reply of LeaseAcquire and LeaseComplete.
type Lease = wire.LeaseReply

// LeaseAcquire returns the key's cached result (Cached) or a lease to run
// the work under (Acquired, LeaseToken); ErrKeyInProgress-like 409 while
// another holder runs it. lease and ttl 0 mean the server's defaults.
func (cl *Client) LeaseAcquire(ctx context.Context, key string, lease, ttl time.Duration) (*Lease, error) {
	var out Lease
	body := &wire.LeaseRequest{Lease: positiveDuration(lease), TTL: positiveDuration(ttl)}
	_, err := cl.do(ctx, &call{method: http.MethodPost, path: leasePath(key, ""), body: body, out: &out})
	return nilIfErr(&out, err)
}

// LeaseRenew extends a lease and returns its new end; lease 0 means the
// lease it was acquired with (else the server's default).
func (cl *Client) LeaseRenew(ctx context.Context, key, token string, lease time.Duration) (time.Time, error) {
	var out wire.LeaseRenewReply
	body := &wire.LeaseTokenRequest{LeaseToken: token, Lease: positiveDuration(lease)}
	_, err := cl.do(ctx, &call{method: http.MethodPost, path: leasePath(key, "/renew"), body: body, out: &out})
	return out.LeaseExpiresAt, err
}

// LeaseComplete stores the result of the work and ends the lease. A
// result the server would refuse (the rule of idem.ValidateJSON: strict
// JSON, numbers within the double range, at most idem.MaxJSONDepth deep
// and idem.MaxArgsBytes long) is refused before sending, with an
// *idemtype.InvalidError naming result (errors.Is ErrInvalid).
func (cl *Client) LeaseComplete(ctx context.Context, key, token string, result json.RawMessage, duration time.Duration) (*Lease, error) {
	if err := checkDocument("result", result); err != nil {
		return nil, fmt.Errorf("idemclient: lease complete %q: %w", key, err)
	}
	var out Lease
	body := &wire.LeaseCompleteRequest{LeaseToken: token, Result: result}
	if duration > 0 {
		ms := duration.Milliseconds()
		body.DurationMS = &ms
	}
	_, err := cl.do(ctx, &call{method: http.MethodPost, path: leasePath(key, "/complete"), body: body, out: &out})
	return nilIfErr(&out, err)
}

// LeaseRelease gives the key up after failed work; nothing is cached.
func (cl *Client) LeaseRelease(ctx context.Context, key, token string) error {
	_, err := cl.do(ctx, &call{method: http.MethodPost, path: leasePath(key, "/release"),
		body: &wire.LeaseTokenRequest{LeaseToken: token}})
	return err
}

func leasePath(key, tail string) string {
	return "/v1/idempotency/" + pathSegment(key) + "/lease" + tail
}
