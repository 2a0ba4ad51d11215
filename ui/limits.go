package ui

import (
	"net/http"
	"strings"

	"github.com/idem-dev/idem/idemclient"
	"github.com/idem-dev/idem/idemhttp/wire"
)

// limitsData is the limits page: the limits the key may see with their
// usage, and the paused queues (or tenants' work in queues).
type limitsData struct {
	Limits []idemclient.Limit
	Paused []wire.PausedScope
}

// limits shows the limits and paused scopes of GET /v1/stats, which carries
// both with the usage and throttled counts.
func (h *Handler) limits(w http.ResponseWriter, r *http.Request, s *session) {
	st, err := h.client(s).Stats(r.Context())
	if err != nil {
		h.apiError(w, r, s, "Could not read the limits", err)
		return
	}
	h.render(w, r, http.StatusOK, "limits", s, &limitsData{Limits: st.Limits, Paused: st.Paused})
}

// scopeText names a pause scope as a user reads it.
func scopeText(queue, tenant string) string {
	if tenant == "" {
		return "queue " + queue
	}
	return "tenant " + tenant + "'s work in queue " + queue
}

// limitAction pauses or resumes a queue (or, with a tenant, that tenant's
// work in it). The API decides who may: a tenant key acts on its own work
// only, and its refusal (403) comes back as a message.
func (h *Handler) limitAction(w http.ResponseWriter, r *http.Request, s *session) {
	back := Prefix + "limits"
	action := r.PathValue("action")
	queue := strings.TrimSpace(r.PostForm.Get("queue"))
	tenant := strings.TrimSpace(r.PostForm.Get("tenant"))
	if action != "pause" && action != "resume" {
		h.notFound(w, r)
		return
	}
	if queue == "" {
		h.flash(w, r, "error", "Name the queue to "+action+".")
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	cl := h.client(s)
	call, verb := cl.QueuePause, "Paused"
	if action == "resume" {
		call, verb = cl.QueueResume, "Resumed"
	}
	rep, err := call(r.Context(), queue, tenant)
	switch {
	case err != nil && problemStatus(err) == http.StatusForbidden:
		h.flash(w, r, "error", "Not allowed with this key: "+problemText(err)+". Pausing another tenant's work needs an admin key.")
	case err != nil:
		h.flash(w, r, "error", "Nothing "+strings.ToLower(verb)+": "+problemText(err))
	case rep.Tenant != tenant:
		// A tenant key acts on its own work only: the API narrowed the scope.
		msg := verb + " " + scopeText(rep.Queue, rep.Tenant) + " only: a tenant key acts on its own work."
		if action == "resume" {
			msg += " A pause of the whole queue stays until an admin key resumes it."
		}
		h.flash(w, r, "ok", msg)
	default:
		h.flash(w, r, "ok", verb+" "+scopeText(rep.Queue, rep.Tenant)+".")
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}
