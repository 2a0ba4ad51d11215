package idemhttp

import (
	"fmt"
	"net/http"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp/wire"
)

// errAdminOnly answers a tenant key that tries to change a limit.
var errAdminOnly = newProblem(http.StatusForbidden, ProblemForbidden, "Forbidden", "limits are set by admin keys")

// limitScope reads {scope}/{name} (and ?queue= for one tenant's work in one
// queue) into a flow-control scope.
func limitScope(r *http.Request) (idem.FlowScope, error) {
	name := r.PathValue("name")
	var sc idem.FlowScope
	switch r.PathValue("scope") {
	case "tenant":
		if err := idem.ValidateName("name", name); err != nil {
			return sc, err
		}
		sc.Tenant = name
		// ?queue= present but empty is no queue name, not the whole
		// tenant: taken for none, a PUT replaced the tenant-wide limit.
		qs := r.URL.Query()
		if err := queryOnce(qs, "queue"); err != nil {
			return sc, err
		}
		if qs.Has("queue") {
			q := qs.Get("queue")
			if err := idem.ValidateName("queue", q); err != nil {
				return sc, err
			}
			sc.Queue = q
		}
	case "queue":
		if err := idem.ValidateName("name", name); err != nil {
			return sc, err
		}
		// The queue is the path's name: a ?queue= beside it was ignored.
		if r.URL.Query().Has("queue") {
			return sc, invalid("queue", "only with scope tenant (scope queue names its queue in the path)")
		}
		sc.Queue = name
	default:
		return sc, invalid("scope", "tenant or queue")
	}
	return sc, nil
}

// renderLimit renders a limit with its usage.
func renderLimit(l *idem.Limit) wire.Limit {
	out := wire.Limit{Tenant: l.Tenant, Queue: l.Queue, Rate: idem.FormatRate(l.Rate, l.Period),
		Concurrency: l.Concurrency, Weight: l.Weight, Usage: wire.Usage{Running: int64(l.Running), WindowUsed: int64(l.WindowUsed), Throttled: l.Throttled}}
	if l.Rate > 0 && !l.WindowStart.IsZero() { // a default ("*") has no window of its own
		out.Usage.WindowStart = l.WindowStart.UTC().Format(time.RFC3339Nano)
	}
	return out
}

func (s *Server) putLimit(w http.ResponseWriter, r *http.Request) error {
	if !isAdmin(r) {
		return errAdminOnly
	}
	sc, err := limitScope(r)
	if err != nil {
		return err
	}
	var req wire.LimitRequest
	if err := s.decodeBody(r, &req, false); err != nil {
		return err
	}
	l := idem.Limit{FlowScope: sc}
	if req.Rate != nil {
		if l.Rate, l.Period, err = idem.ParseRate(*req.Rate); err != nil {
			return err
		}
	}
	if req.Concurrency != nil {
		if *req.Concurrency < 1 {
			return invalid("concurrency", "must be a positive integer")
		}
		l.Concurrency = *req.Concurrency
	}
	if req.Weight != nil {
		if *req.Weight < 1 || *req.Weight > idem.MaxWeight {
			return invalid("weight", fmt.Sprintf("must be between 1 and %d", idem.MaxWeight))
		}
		if sc.Tenant == "" {
			return invalid("weight", "only a tenant has a weight")
		}
		l.Weight = *req.Weight
	}
	if l.Rate == 0 && l.Concurrency == 0 && l.Weight == 0 {
		return invalid("rate", "a rate, a concurrency, a weight or a combination")
	}
	got, err := s.client.LimitPut(r.Context(), l)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, renderLimit(got))
	return nil
}

// visibleLimits returns the limits the caller may see: every limit for an
// admin key, its own tenant's otherwise.
func (s *Server) visibleLimits(r *http.Request) ([]wire.Limit, error) {
	tenant := ""
	if !isAdmin(r) {
		tenant = tenantOf(r)
	}
	ls, err := s.client.LimitList(r.Context(), tenant)
	if err != nil {
		return nil, err
	}
	out := make([]wire.Limit, 0, len(ls))
	for _, l := range ls {
		out = append(out, renderLimit(l))
	}
	return out, nil
}

func (s *Server) listLimits(w http.ResponseWriter, r *http.Request) error {
	ls, err := s.visibleLimits(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.LimitList{Limits: ls})
	return nil
}

func (s *Server) getLimit(w http.ResponseWriter, r *http.Request) error {
	sc, err := limitScope(r)
	if err != nil {
		return err
	}
	ls, err := s.visibleLimits(r)
	if err != nil {
		return err
	}
	for _, l := range ls {
		if l.Tenant == sc.Tenant && l.Queue == sc.Queue {
			writeJSON(w, http.StatusOK, l)
			return nil
		}
	}
	return newProblem(http.StatusNotFound, ProblemNotFound, "Not found", "no limit on this scope")
}

func (s *Server) deleteLimit(w http.ResponseWriter, r *http.Request) error {
	if !isAdmin(r) {
		return errAdminOnly
	}
	sc, err := limitScope(r)
	if err != nil {
		return err
	}
	if err := s.client.LimitDelete(r.Context(), sc); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// pauseScope reads the queue and, from the optional body, the tenant of a
// pause or resume: a tenant key acts on its own tenant's work only.
func (s *Server) pauseScope(r *http.Request) (queue, tenant string, err error) {
	queue = r.PathValue("queue")
	if err := idem.ValidateName("queue", queue); err != nil {
		return "", "", err
	}
	var req wire.PauseRequest
	if err := s.decodeBody(r, &req, true); err != nil {
		return "", "", err
	}
	if req.Tenant != "" {
		if err := idem.ValidateName("tenant", req.Tenant); err != nil {
			return "", "", err
		}
	}
	if !isAdmin(r) {
		if req.Tenant != "" && req.Tenant != tenantOf(r) {
			return "", "", newProblem(http.StatusForbidden, ProblemForbidden, "Forbidden", "a tenant key pauses only its own work")
		}
		req.Tenant = tenantOf(r)
	}
	return queue, req.Tenant, nil
}

func (s *Server) pauseQueue(w http.ResponseWriter, r *http.Request) error {
	queue, tenant, err := s.pauseScope(r)
	if err != nil {
		return err
	}
	if err := s.client.QueuePause(r.Context(), queue, tenant); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.PauseReply{Queue: queue, Tenant: tenant, Paused: true})
	return nil
}

func (s *Server) resumeQueue(w http.ResponseWriter, r *http.Request) error {
	queue, tenant, err := s.pauseScope(r)
	if err != nil {
		return err
	}
	if err := s.client.QueueResume(r.Context(), queue, tenant); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.PauseReply{Queue: queue, Tenant: tenant, Paused: false})
	return nil
}

// pausedScopes lists the paused scopes the caller may see.
func (s *Server) pausedScopes(r *http.Request) ([]wire.PausedScope, error) {
	ps, err := s.client.QueuePauseList(r.Context())
	if err != nil {
		return nil, err
	}
	out := []wire.PausedScope{}
	for _, p := range ps {
		if isAdmin(r) || p.Tenant == "" || p.Tenant == tenantOf(r) {
			out = append(out, wire.PausedScope{Queue: p.Queue, Tenant: p.Tenant})
		}
	}
	return out, nil
}
