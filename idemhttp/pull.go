package idemhttp

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp/wire"
)

func (s *Server) claim(w http.ResponseWriter, r *http.Request) error {
	var req wire.ClaimRequest
	body, err := readBody(r, s.cfg.MaxBodyBytes, false)
	if err != nil {
		return err
	}
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	if explicitZero(body, "limit") {
		return invalid("limit", "must be between 1 and 100")
	}
	if req.Kinds != nil && len(req.Kinds) == 0 {
		// An empty list would claim no kind at all; absent is any kind.
		return invalid("kinds", "must hold at least one kind (omit it for any kind)")
	}
	lease, err := parseDuration("lease", req.Lease)
	if err != nil {
		return err
	}
	wait, err := parseDuration("wait", req.Wait)
	if err != nil {
		return err
	}
	var throttle idem.ClaimThrottle
	p := idem.ClaimParams{Tenant: tenantOf(r), Queues: req.Queues, Kinds: req.Kinds, WorkerID: req.WorkerID, Limit: req.Limit,
		Throttle: &throttle}
	if req.Limit < 0 {
		return invalid("limit", "must be between 1 and 100")
	}
	if lease != nil {
		if *lease == 0 {
			return invalid("lease", "must be at least 1s")
		}
		p.Lease = *lease
	}
	if wait != nil {
		p.Wait = *wait
	}
	if p.Wait > 0 {
		// The reply may come after the wait: extend the write deadline.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(p.Wait + s.cfg.WriteTimeout))
	}
	ctx, cancel := s.claimContext(r.Context())
	defer cancel()
	if p.Wait > 0 {
		// A key revoked through this node ends its long polls at once.
		var stop func()
		ctx, stop, err = s.auth.watch(ctx, r)
		if errors.Is(err, errKeyRevoked) {
			return revokedKey(w)
		}
		if err != nil {
			return err
		}
		defer stop()
		s.claimWaiting.Signal(struct{}{})
	}
	jobs, err := s.client.Claim(ctx, p)
	if len(jobs) == 0 && errors.Is(context.Cause(ctx), errKeyRevoked) {
		return revokedKey(w)
	}
	if err != nil && s.draining.Err() != nil && r.Context().Err() == nil {
		jobs, err = nil, nil // shutting down: an empty claim, not an error
	}
	if err != nil {
		return err
	}
	reply := wire.ClaimReply{Jobs: renderJobs(jobs, true)}
	if len(jobs) == 0 {
		// Nothing was claimed: a repeat of the request may simply claim
		// again, so the empty answer is not kept under its key.
		notStored(r)
	}
	if len(jobs) == 0 && throttle.Throttled {
		reply.Throttled = true
		if at := throttle.NextAvailableAt; !at.IsZero() {
			after := max(0, time.Until(at))
			reply.NextAvailableAt = &at
			reply.RetryAfter = after.Round(time.Millisecond).String()
			w.Header().Set("Retry-After", strconv.FormatInt(int64((after+time.Second-1)/time.Second), 10))
		}
	}
	writeJSON(w, http.StatusOK, reply)
	return nil
}

func requireToken(token string) error {
	if token == "" {
		return invalid("lease_token", "is required")
	}
	return nil
}

func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	var req wire.HeartbeatRequest
	if err := s.decodeBody(r, &req, false); err != nil {
		return err
	}
	if err := requireToken(req.LeaseToken); err != nil {
		return err
	}
	lease, err := parseDuration("lease", req.Lease)
	if err != nil {
		return err
	}
	var d time.Duration
	if lease != nil {
		if *lease == 0 {
			return invalid("lease", "must be at least 1s")
		}
		d = *lease
	}
	until, err := s.client.Heartbeat(r.Context(), tenantOf(r), id, req.LeaseToken, d)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.HeartbeatReply{LeaseExpiresAt: apiTime(until)})
	return nil
}

func (s *Server) complete(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	var req wire.CompleteRequest
	if err := s.decodeBody(r, &req, false); err != nil {
		return err
	}
	if err := requireToken(req.LeaseToken); err != nil {
		return err
	}
	job, err := s.client.Complete(r.Context(), tenantOf(r), id, req.LeaseToken, rawOrNil(req.Result))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, renderJob(job, false))
	return nil
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	var req wire.FailRequest
	if err := s.decodeBody(r, &req, false); err != nil {
		return err
	}
	if err := requireToken(req.LeaseToken); err != nil {
		return err
	}
	after, err := parseDuration("retry_after", req.RetryAfter)
	if err != nil {
		return err
	}
	if len(req.Error) > 64<<10 {
		return invalid("error", "at most 64 KiB")
	}
	p := idem.FailParams{Error: req.Error, NoRetry: req.Retry != nil && !*req.Retry, RetryAfter: after,
		ErrorCode: req.ErrorCode}
	job, err := s.client.Fail(r.Context(), tenantOf(r), id, req.LeaseToken, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, renderJob(job, false))
	return nil
}
