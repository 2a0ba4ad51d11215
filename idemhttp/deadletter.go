package idemhttp

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp/wire"
)

// resolveDead marks a dead job resolved: POST /v1/dlq/{id}/resolve
// {note?} → 200 job. A job that is not dead is 409, an unknown one 404;
// neither writes anything.
func (s *Server) resolveDead(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	var req wire.ResolveRequest
	if err := s.decodeBody(r, &req, true); err != nil {
		return err
	}
	job, err := s.client.DLQResolve(r.Context(), tenantOf(r), id, req.Note)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, renderJob(job, false))
	return nil
}

// deadLetterQuery reads the list parameters error_code and resolved
// (true or false) into f.
func deadLetterQuery(q url.Values, f *idem.JobFilter) error {
	v, ok, err := queryValue(q, "error_code")
	if err != nil {
		return err
	}
	if ok {
		if err := idem.ValidateName("error_code", v); err != nil {
			return err
		}
		f.ErrorCode = v
	}
	if err := queryOnce(q, "resolved"); err != nil {
		return err
	}
	if q.Has("resolved") { // resolved= (empty) is neither true nor false
		b, err := strconv.ParseBool(q.Get("resolved"))
		if err != nil {
			return invalid("resolved", "must be true or false")
		}
		f.Resolved = &b
	}
	return nil
}
