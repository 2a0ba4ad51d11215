package idemhttp

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp/wire"
	"github.com/idem-dev/idem/idemtype"
)

// createBatch: POST /v1/batches → 201 {batch, existing:false}; a repeat of
// the key: 200 {batch, existing:true} (Idempotent-Replayed). One bad job
// fails the whole batch with a 4xx naming it (jobs[i].field, or
// on_finish.field for the completion job); nothing is written.
func (s *Server) createBatch(w http.ResponseWriter, r *http.Request) error {
	hk, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	body, err := readBody(r, s.cfg.MaxBodyBytes, false)
	if err != nil {
		return err
	}
	var req wire.BatchCreateRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	zeros := batchZeroAttempts(body)
	switch {
	case hk != "" && req.Key != "" && hk != req.Key:
		return invalid("key", "differs from the Idempotency-Key header")
	case req.Key == "":
		req.Key = hk
	}
	if req.Key == "" {
		return invalid("key", "a batch needs a key (body key or Idempotency-Key header)")
	}
	if len(req.Jobs) == 0 || len(req.Jobs) > MaxBatch {
		return invalid("jobs", fmt.Sprintf("must hold 1 to %d jobs", MaxBatch))
	}
	tenant := tenantOf(r)
	p := idem.BatchCreateParams{Tenant: tenant, Key: req.Key, Metadata: rawOrNil(req.Metadata),
		Jobs: make([]idem.EnqueueParams, len(req.Jobs))}
	for i := range req.Jobs {
		if zeros.jobs[i] {
			return invalid(fmt.Sprintf("jobs[%d].max_attempts", i), "must be between 1 and 1000")
		}
		if p.Jobs[i], err = s.enqueueParams(tenant, &req.Jobs[i]); err != nil {
			return prefixInvalid(fmt.Sprintf("jobs[%d].", i), err)
		}
	}
	if req.OnFinish != nil {
		of := *req.OnFinish
		if of.IdempotencyKey != "" {
			return invalid("on_finish.idempotency_key", "not allowed: the batch key creates the completion job once")
		}
		if len(of.DependsOn) > 0 {
			return invalid("on_finish.depends_on", "not allowed: the completion job depends on the batch's jobs")
		}
		if zeros.onFinish {
			return invalid("on_finish.max_attempts", "must be between 1 and 1000")
		}
		ep, err := s.enqueueParams(tenant, &of)
		if err != nil {
			return prefixInvalid("on_finish.", err)
		}
		p.OnFinish = &ep
	}
	b, err := s.client.BatchCreate(r.Context(), p)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if b.Existing {
		status = http.StatusOK
		w.Header().Set(headerIdempotentReplayed, "true")
	}
	w.Header().Set("Location", "/v1/batches/"+formatID(b.ID))
	writeJSON(w, status, wire.BatchCreateReply{Batch: renderBatch(b), Existing: b.Existing})
	return nil
}

// zeroAttempts says which jobs of a batch body set max_attempts to an
// explicit 0, which the wire structs cannot tell from absent: out of range
// (400), as for POST /v1/jobs, not the default.
type zeroAttempts struct {
	jobs     map[int]bool
	onFinish bool
}

// batchZeroAttempts reads the explicit zeros of a POST /v1/batches body
// that decoded as a wire.BatchCreateRequest.
func batchZeroAttempts(body []byte) zeroAttempts {
	var out zeroAttempts
	if !mayName(body, "max_attempts") {
		return out
	}
	var raw struct {
		Jobs     []json.RawMessage `json:"jobs"`
		OnFinish json.RawMessage   `json:"on_finish"`
	}
	if json.Unmarshal(body, &raw) != nil {
		return out
	}
	out.jobs = map[int]bool{}
	for i, j := range raw.Jobs {
		out.jobs[i] = explicitZero(j, "max_attempts")
	}
	out.onFinish = len(raw.OnFinish) > 0 && explicitZero(raw.OnFinish, "max_attempts")
	return out
}

// getBatch: GET /v1/batches/{id} → 200 batch; 404.
func (s *Server) getBatch(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	b, err := s.client.BatchGet(r.Context(), tenantOf(r), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, renderBatch(b))
	return nil
}

// cancelBatch: POST /v1/batches/{id}/cancel → 200 batch with its unfinished
// jobs cancelled; 404. A body is optional and, as a job's cancel, an empty
// object.
func (s *Server) cancelBatch(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	if err := s.decodeBody(r, &struct{}{}, true); err != nil {
		return err
	}
	b, err := s.client.BatchCancel(r.Context(), tenantOf(r), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, renderBatch(b))
	return nil
}

// prefixInvalid puts prefix before the field of a validation error.
func prefixInvalid(prefix string, err error) error {
	var inv *idemtype.InvalidError
	if errors.As(err, &inv) {
		return invalid(prefix+inv.Field, inv.Reason)
	}
	var pr *Problem
	if errors.As(err, &pr) && len(pr.Errors) == 1 {
		for field, msg := range pr.Errors {
			return invalid(prefix+field, msg)
		}
	}
	return err
}

func renderBatch(b *idem.Batch) *wire.Batch {
	out := &wire.Batch{ID: formatID(b.ID), Tenant: b.Tenant, Key: b.Key, CreatedAt: b.CreatedAt,
		Metadata: rawOrNil(b.Metadata), Counts: stateCounts(b.Counts), Total: b.Total, Finished: b.Finished,
		Jobs: renderJobs(b.Jobs, false)}
	if b.OnFinish != nil {
		out.OnFinish = renderJob(b.OnFinish, false)
	}
	return out
}
