package ui

import (
	"errors"
	"net/http"
	"strings"

	"github.com/idem-dev/idem/idemclient"
	"github.com/idem-dev/idem/idemtype"
)

// cacheData is the result-cache page.
type cacheData struct {
	Stats  *idemclient.CacheStats
	Key    string
	Record *idemclient.Record
	Error  string
}

func (h *Handler) cache(w http.ResponseWriter, r *http.Request, s *session) {
	cl := h.client(s)
	st, err := cl.RecordStats(r.Context())
	if err != nil {
		h.apiError(w, r, s, "Could not load the cache statistics", err)
		return
	}
	d := &cacheData{Stats: st, Key: strings.TrimSpace(r.URL.Query().Get("key"))}
	status := http.StatusOK
	if _, ok := r.URL.Query()["key"]; ok {
		switch {
		case d.Key == "":
			d.Error, status = "Enter a key to look up.", http.StatusBadRequest
		default:
			if d.Record, err = cl.GetRecord(r.Context(), d.Key); err != nil {
				status = problemStatus(err)
				d.Error = "Key " + d.Key + ": " + problemText(err)
				if errors.Is(err, idemtype.ErrNotFound) {
					d.Error = "No record for key " + d.Key + " in this tenant."
				}
			}
		}
	}
	h.render(w, r, status, "cache", s, d)
}
