package ui

import (
	"net/http"
	"net/url"

	"github.com/idem-dev/idem/idemclient"
)

// schedulesData is the schedules page.
type schedulesData struct {
	Schedules []*idemclient.Schedule
	// Fired is the schedule just triggered from this page, shown only
	// while the API still reports the triggered job as its last one.
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
	q := r.URL.Query()
	if name, job := q.Get("triggered"), q.Get("job"); name != "" && job != "" {
		for _, sc := range list {
			if sc.Name == name && sc.LastJobID == job {
				d.Fired = sc
			}
		}
	}
	h.render(w, r, http.StatusOK, "schedules", s, d)
}

// scheduleTrigger fires a schedule now ("Trigger now") and returns to the
// schedules page, which links the job it enqueued; a refusal is a message.
func (h *Handler) scheduleTrigger(w http.ResponseWriter, r *http.Request, s *session) {
	name := r.PathValue("name")
	res, err := h.client(s).TriggerSchedule(r.Context(), name, "")
	if err != nil {
		h.flash(w, r, "error", "Schedule "+name+" not triggered: "+problemText(err))
		http.Redirect(w, r, Prefix+"schedules", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, Prefix+"schedules?"+url.Values{"triggered": {name}, "job": {res.Job.ID}}.Encode(),
		http.StatusSeeOther)
}
