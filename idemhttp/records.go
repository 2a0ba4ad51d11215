package idemhttp

import (
	"net/http"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemtype"
)

func pathKey(r *http.Request) (string, error) {
	k := r.PathValue("key")
	if err := idem.ValidateKey("key", k); err != nil {
		return "", err
	}
	return k, nil
}

func (s *Server) getRecord(w http.ResponseWriter, r *http.Request) error {
	k, err := pathKey(r)
	if err != nil {
		return err
	}
	withResult, err := includeResult(r)
	if err != nil {
		return err
	}
	rec, err := s.client.RecordGet(r.Context(), tenantOf(r), k)
	if err != nil {
		return err
	}
	out := renderRecord(rec)
	if withResult && rec.Status == idemtype.RecordCompleted {
		out.Result = rec.Result
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) deleteRecord(w http.ResponseWriter, r *http.Request) error {
	k, err := pathKey(r)
	if err != nil {
		return err
	}
	if err := s.client.RecordDelete(r.Context(), tenantOf(r), k); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) recordStats(w http.ResponseWriter, r *http.Request) error {
	cs, err := s.cacheStatsOf(r.Context(), tenantOf(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, cs)
	return nil
}
