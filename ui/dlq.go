package ui

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/idem-dev/idem/idemclient"
)

// dlqCountLimit bounds the dead jobs counted for a summary or confirmation.
const dlqCountLimit = 10000

// dlqGroup is the count of dead jobs of one queue and kind: Count the
// unresolved ones, which "Requeue all…" counts and requeues, Resolved the
// resolved ones (dealt with, kept for audit, left by bulk actions).
type dlqGroup struct {
	Queue, Kind string
	Count       int
	Resolved    int
}

// dlqData is the dead-letter page.
type dlqData struct {
	Q       *jobQuery
	Errors  []string
	Page    *scanned
	NextURL string
	Groups  []dlqGroup
	More    bool // more dead jobs than dlqCountLimit
	Return  string
}

func (h *Handler) dlq(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	q.Del("state")
	jq, errs := parseJobQuery(q)
	d := &dlqData{Q: jq, Errors: errs, Return: r.URL.RequestURI()}
	if len(errs) > 0 {
		h.render(w, r, http.StatusBadRequest, "dlq", s, d)
		return
	}
	cl := h.client(s)
	page, err := h.listJobs(r.Context(), cl, jq, true)
	if err != nil {
		if !filterRefused(err) {
			h.apiError(w, r, s, "Could not list the dead jobs", err)
			return
		}
		d.Errors = []string{problemText(err)}
		h.render(w, r, problemStatus(err), "dlq", s, d)
		return
	}
	d.Page = page
	if page.NextCursor != "" {
		d.NextURL = withCursor(r.URL, page.NextCursor)
	}
	all, more, err := h.countDead(r, cl, &jobQuery{Limit: dlqCountLimit})
	if err != nil {
		h.apiError(w, r, s, "Could not count the dead jobs", err)
		return
	}
	d.Groups, d.More = groupDead(all), more
	h.render(w, r, http.StatusOK, "dlq", s, d)
}

// countDead lists up to dlqCountLimit dead jobs matching jq.
func (h *Handler) countDead(r *http.Request, cl *idemclient.Client, jq *jobQuery) ([]*idemclient.Job, bool, error) {
	jq.Limit = dlqCountLimit
	jq.list.Limit = dlqCountLimit
	page, err := scanJobs(r.Context(), cl, jq, true, max(h.cfg.ScanLimit, dlqCountLimit))
	if err != nil {
		return nil, false, err
	}
	return page.Jobs, page.NextCursor != "", nil
}

func groupDead(jobs []*idemclient.Job) []dlqGroup {
	m := map[[2]string]*dlqGroup{}
	for _, j := range jobs {
		k := [2]string{j.Queue, j.Kind}
		g := m[k]
		if g == nil {
			g = &dlqGroup{Queue: j.Queue, Kind: j.Kind}
			m[k] = g
		}
		if j.ResolvedAt != nil {
			g.Resolved++
		} else {
			g.Count++
		}
	}
	out := make([]dlqGroup, 0, len(m))
	for _, g := range m {
		out = append(out, *g)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Queue != out[j].Queue {
			return out[i].Queue < out[j].Queue
		}
		return out[i].Kind < out[j].Kind
	})
	return out
}

// dlqSelected requeues or deletes the selected dead jobs.
func (h *Handler) dlqSelected(w http.ResponseWriter, r *http.Request, s *session) {
	back := returnTo(r, Prefix+"dlq")
	ids := r.PostForm["id"]
	action := r.PostForm.Get("action")
	if len(ids) == 0 {
		h.flash(w, r, "error", "Select at least one dead job first.")
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	cl := h.client(s)
	switch action {
	case "requeue":
		n, err := cl.DLQRequeue(r.Context(), ids, nil)
		switch {
		case err != nil:
			h.flash(w, r, "error", "Nothing requeued: "+problemText(err))
		case n < len(ids):
			// Not a success: the others were no longer dead (requeued or
			// retried from elsewhere meanwhile).
			h.flash(w, r, "error", fmt.Sprintf("Requeued %d of %d selected jobs: the others are not dead jobs of this tenant (any more).", n, len(ids)))
		default:
			h.flash(w, r, "ok", fmt.Sprintf("Requeued %d of %d selected jobs.", n, len(ids)))
		}
	case "delete":
		var ok int
		var failed []string
		for _, id := range ids {
			if err := cl.DLQDelete(r.Context(), id); err != nil {
				failed = append(failed, "job "+id+": "+problemText(err))
				continue
			}
			ok++
		}
		if len(failed) > 0 {
			h.flash(w, r, "error", fmt.Sprintf("Deleted %d of %d. Not deleted: %s", ok, len(ids), strings.Join(failed, "; ")))
		} else {
			h.flash(w, r, "ok", fmt.Sprintf("Deleted %d dead jobs.", ok))
		}
	default:
		h.flash(w, r, "error", "Choose Requeue or Delete.")
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// dlqConfirmData shows how many dead jobs a filter requeues.
type dlqConfirmData struct {
	Queue, Kind string
	Count       int
	More        bool
	Errors      []string
}

// dlqFilter is the queue-and-kind filter of "Requeue all…": the
// unresolved dead jobs only (a resolved one is dealt with and kept for
// audit; the API's requeue by filter leaves it too).
func (h *Handler) dlqFilter(v url.Values) (*jobQuery, []string) {
	q := url.Values{"queue": {v.Get("queue")}, "kind": {v.Get("kind")}}
	jq, errs := parseJobQuery(q)
	unresolved := false
	jq.list.Resolved = &unresolved
	return jq, errs
}

// dlqConfirm counts the dead jobs of a queue and kind before requeueing.
func (h *Handler) dlqConfirm(w http.ResponseWriter, r *http.Request, s *session) {
	jq, errs := h.dlqFilter(r.URL.Query())
	d := &dlqConfirmData{Queue: jq.Queue, Kind: jq.Kind, Errors: errs}
	if jq.Queue == "" && jq.Kind == "" {
		d.Errors = append(d.Errors, "Choose a queue or a kind (or both) to requeue by filter.")
	}
	if len(d.Errors) > 0 {
		h.render(w, r, http.StatusBadRequest, "dlqconfirm", s, d)
		return
	}
	jobs, more, err := h.countDead(r, h.client(s), jq)
	if err != nil {
		if !filterRefused(err) {
			h.apiError(w, r, s, "Could not count the dead jobs", err)
			return
		}
		d.Errors = []string{problemText(err)}
		h.render(w, r, problemStatus(err), "dlqconfirm", s, d)
		return
	}
	d.Count, d.More = len(jobs), more
	h.render(w, r, http.StatusOK, "dlqconfirm", s, d)
}

// dlqRequeueFilter requeues every dead job of a queue and kind that the
// confirmation counts (up to dlqCountLimit). It lists them and requeues
// them by ids (a requeue by filter stops at the server's batch of 1,000);
// idemclient.DLQRequeue sends them oldest first, so a FIFO partition's
// older dead jobs come back before its newer ones.
func (h *Handler) dlqRequeueFilter(w http.ResponseWriter, r *http.Request, s *session) {
	jq, errs := h.dlqFilter(r.PostForm)
	if jq.Queue == "" && jq.Kind == "" {
		errs = append(errs, "Choose a queue or a kind.")
	}
	if len(errs) > 0 {
		h.flash(w, r, "error", strings.Join(errs, " "))
		http.Redirect(w, r, Prefix+"dlq", http.StatusSeeOther)
		return
	}
	cl := h.client(s)
	jobs, more, err := h.countDead(r, cl, jq)
	if err != nil {
		h.flash(w, r, "error", "Nothing requeued: "+problemText(err))
		http.Redirect(w, r, Prefix+"dlq", http.StatusSeeOther)
		return
	}
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	n := 0
	if len(ids) > 0 {
		n, err = cl.DLQRequeue(r.Context(), ids, nil)
	}
	if err != nil {
		h.flash(w, r, "error", fmt.Sprintf("Requeued %d of %d dead jobs, then: %s", n, len(ids), problemText(err)))
		http.Redirect(w, r, Prefix+"dlq", http.StatusSeeOther)
		return
	}
	msg := fmt.Sprintf("Requeued %d dead jobs.", n)
	if more {
		msg += " More match: requeue again for the rest."
	}
	h.flash(w, r, "ok", msg)
	http.Redirect(w, r, Prefix+"dlq", http.StatusSeeOther)
}
