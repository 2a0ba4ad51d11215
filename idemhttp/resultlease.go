package idemhttp

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp/wire"
	"github.com/idem-dev/idem/idemtype"
)

// The result-cache lease over HTTP (idem.Client.ResultLease*): Do for
// clients in any language.

// includeResult reads ?include=result, given at most once; include= (empty)
// includes nothing and is refused as such.
func includeResult(r *http.Request) (bool, error) {
	v, ok, err := queryValue(r.URL.Query(), "include")
	if err != nil {
		return false, err
	}
	switch {
	case !ok:
		return false, nil
	case v == "result":
		return true, nil
	default:
		return false, invalid("include", "only \"result\" can be included")
	}
}

// positiveDuration parses an optional duration that must be above zero
// (a lease: at least one second).
func positiveDuration(field string, s *string) (time.Duration, error) {
	d, err := parseDuration(field, s)
	if err != nil || d == nil {
		return 0, err
	}
	if field == "lease" && *d < time.Second {
		return 0, invalid(field, "must be at least 1s") // as a pull claim's lease
	}
	if *d <= 0 {
		return 0, invalid(field, "must be positive")
	}
	return *d, nil
}

// leaseRoute adapts a lease handler: the key of the path is validated and
// the request body decoded into a T (optional: an absent body is a zero
// T) before handle runs.
func leaseRoute[T any](s *Server, optional bool, handle func(w http.ResponseWriter, r *http.Request, key string, req *T) error) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		key, err := pathKey(r)
		if err != nil {
			return err
		}
		var req T
		if err := s.decodeBody(r, &req, optional); err != nil {
			return err
		}
		return handle(w, r, key, &req)
	}
}

// leaseAcquire: POST /v1/idempotency/{key}/lease → 200 with the cached
// result or a lease token; 409 while another holder runs the work.
func (s *Server) leaseAcquire(w http.ResponseWriter, r *http.Request, key string, req *wire.LeaseRequest) error {
	lease, err := positiveDuration("lease", req.Lease)
	if err != nil {
		return err
	}
	ttl, err := positiveDuration("result_ttl", req.TTL)
	if err != nil {
		return err
	}
	l, err := s.client.ResultLeaseAcquire(r.Context(), key, &idem.ResultLeaseOpts{Tenant: tenantOf(r), Lease: lease, TTL: ttl})
	if err != nil {
		return err
	}
	out := &wire.LeaseReply{Key: key}
	if l.Cached != nil {
		out = renderDoResult(l.Cached)
	} else {
		until := apiTime(l.Until)
		out.Acquired, out.LeaseToken, out.LeaseExpiresAt = true, l.Token, &until
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// leaseRenew: POST /v1/idempotency/{key}/lease/renew → 200
// {lease_expires_at}; 409 when the lease was lost.
func (s *Server) leaseRenew(w http.ResponseWriter, r *http.Request, key string, req *wire.LeaseTokenRequest) error {
	lease, err := positiveDuration("lease", req.Lease)
	if err != nil {
		return err
	}
	until, err := s.client.ResultLeaseRenew(r.Context(), tenantOf(r), key, req.LeaseToken, lease)
	if err != nil {
		return leaseLost(key, err)
	}
	writeJSON(w, http.StatusOK, &wire.LeaseRenewReply{LeaseExpiresAt: apiTime(until)})
	return nil
}

// leaseComplete: POST /v1/idempotency/{key}/lease/complete → 200 the
// stored result; 409 when the lease was lost (nothing stored).
func (s *Server) leaseComplete(w http.ResponseWriter, r *http.Request, key string, req *wire.LeaseCompleteRequest) error {
	ttl, err := positiveDuration("result_ttl", req.TTL)
	if err != nil {
		return err
	}
	var dur time.Duration
	if req.DurationMS != nil {
		if *req.DurationMS < 0 {
			return invalid("duration_ms", "must not be negative")
		}
		dur = time.Duration(*req.DurationMS) * time.Millisecond
	}
	result := rawOrNil(req.Result)
	if result != nil {
		// The rule of a job's result (strict JSON, double range, depth):
		// a cached result is read back by every later caller.
		if err := idem.ValidateJSON("result", result); err != nil {
			return err
		}
	}
	res, err := s.client.ResultLeaseComplete(r.Context(), tenantOf(r), key, req.LeaseToken, result, ttl, dur)
	if err != nil {
		return leaseLost(key, err)
	}
	writeJSON(w, http.StatusOK, renderDoResult(res))
	return nil
}

// leaseLost answers a lost result lease with a detail that names the
// caller's key: the store's error names the stored key (an internal
// namespace prefix with a control byte) and the chain of internal steps.
// Other errors pass unchanged.
func leaseLost(key string, err error) error {
	if !errors.Is(err, idemtype.ErrLeaseLost) {
		return err
	}
	return newProblem(http.StatusConflict, ProblemLeaseLost, "Lease lost",
		fmt.Sprintf("the lease of key %q is not held with this token: it ended, was released or completed, or another holder took the key", key))
}

// leaseRelease: POST /v1/idempotency/{key}/lease/release → 204; the
// failure is not cached.
func (s *Server) leaseRelease(w http.ResponseWriter, r *http.Request, key string, req *wire.LeaseTokenRequest) error {
	if req.Lease != nil {
		return invalid("lease", "only renew takes a lease")
	}
	if err := s.client.ResultLeaseRelease(r.Context(), tenantOf(r), key, req.LeaseToken); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// renderDoResult converts a stored or cached result.
func renderDoResult(d *idem.DoResult) *wire.LeaseReply {
	ms := d.Duration.Milliseconds()
	out := &wire.LeaseReply{Key: d.Key, Cached: d.WasCached, Result: d.Result, DurationMS: &ms}
	if d.StoredAt != nil {
		at := apiTime(*d.StoredAt)
		out.StoredAt = &at
	}
	if d.OriginalJobID != 0 {
		out.OriginalJobID = formatID(d.OriginalJobID)
	}
	return out
}
