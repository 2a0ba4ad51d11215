package ui

import (
	"net/http"
	"net/url"

	"github.com/idem-dev/idem/idemclient"
)

// schedulesData is the schedules page.
type schedulesData struct {
	Schedules []*idemclient.Schedule
	// Fired is the schedule just triggered from this page (its last job,
	// read back from the API, is the job the trigger enqueued).
	Fired *idemclient.Schedule
}

// schedules lists the tenant's schedules with their last and next firings.
func (h *Handler) schedules(w http.ResponseWriter, r *http.Request, s *session) {
	list, err := h.client(s).ListSchedules(r.Context())
	if err != nil {
		h.apiError(w, r, s, "Could not list the schedules", err)
		return
	}
	d := &schedulesData{Schedules: list}
	if name := r.URL.Query().Get("triggered"); name != "" {
		for _, sc := range list {
			if sc.Name == name && sc.LastJobID != "" {
				d.Fired = sc
			}
		}
	}
	h.render(w, r, http.StatusOK, "schedules", s, d)
}

// scheduleTrigger fires a schedule now ("Trigger now") and returns to the
// schedules page, which links the job it enqueued.
func (h *Handler) scheduleTrigger(w http.ResponseWriter, r *http.Request, s *session) {
	name := r.PathValue("name")
	res, err := h.client(s).TriggerSchedule(r.Context(), name, "")
	if err != nil {
		h.flash(w, r, "error", "Schedule "+name+" not triggered: "+problemText(err))
		http.Redirect(w, r, Prefix+"schedules", http.StatusSeeOther)
		return
	}
	h.flash(w, r, "ok", "Schedule "+name+" fired now: job "+res.Job.ID+" enqueued.")
	http.Redirect(w, r, Prefix+"schedules?triggered="+url.QueryEscape(name), http.StatusSeeOther)
}
