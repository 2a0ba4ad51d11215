package ui

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/idem-dev/idem/idemclient"
	"github.com/idem-dev/idem/idemtype"
)

// jobsData is the job list page.
type jobsData struct {
	Q        *jobQuery
	States   []string
	Errors   []string
	Page     *scanned
	NextURL  string
	Filtered bool // an args or metadata filter ran in the dashboard
	Return   string
}

func (h *Handler) jobs(w http.ResponseWriter, r *http.Request, s *session) {
	jq, errs := parseJobQuery(r.URL.Query())
	d := &jobsData{Q: jq, States: stateNames, Errors: errs, Return: r.URL.RequestURI(),
		Filtered: jq.args != nil || jq.meta != nil}
	if len(errs) > 0 {
		h.render(w, r, http.StatusBadRequest, "jobs", s, d)
		return
	}
	page, err := h.listJobs(r.Context(), h.client(s), jq, false)
	if err != nil {
		if !filterRefused(err) {
			h.apiError(w, r, s, "Could not list jobs", err)
			return
		}
		d.Errors = []string{problemText(err)}
		h.render(w, r, problemStatus(err), "jobs", s, d)
		return
	}
	d.Page = page
	if page.NextCursor != "" {
		d.NextURL = withCursor(r.URL, page.NextCursor)
	}
	h.render(w, r, http.StatusOK, "jobs", s, d)
}

func withCursor(u *url.URL, cursor string) string {
	q := u.Query()
	q.Set("cursor", cursor)
	return u.Path + "?" + q.Encode()
}

// returnTo is the page a form asks to come back to, kept inside the dashboard.
func returnTo(r *http.Request, fallback string) string {
	if v := r.PostForm.Get("return"); v != "" {
		return safeNext(v)
	}
	return fallback
}

// jobsBulk cancels or retries the selected jobs, one API call each.
func (h *Handler) jobsBulk(w http.ResponseWriter, r *http.Request, s *session) {
	back := returnTo(r, Prefix+"jobs")
	action := r.PostForm.Get("action")
	ids := r.PostForm["id"]
	if action != "cancel" && action != "retry" {
		h.flash(w, r, "error", "Choose Cancel or Retry.")
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	if len(ids) == 0 {
		h.flash(w, r, "error", "Select at least one job first.")
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	cl := h.client(s)
	var ok int
	var failed []string
	for _, id := range ids {
		var err error
		if action == "cancel" {
			_, err = cl.CancelJob(r.Context(), id)
		} else {
			_, err = cl.RetryJob(r.Context(), id, time.Time{})
		}
		if err != nil {
			failed = append(failed, fmt.Sprintf("job %s: %s", id, problemText(err)))
			continue
		}
		ok++
	}
	verb := map[string]string{"cancel": "Cancelled", "retry": "Retried"}[action]
	msg := fmt.Sprintf("%s %d of %d jobs.", verb, ok, len(ids))
	kind := "ok"
	if len(failed) > 0 {
		kind, msg = "error", msg+" Not done: "+strings.Join(failed, "; ")
	}
	h.flash(w, r, kind, msg)
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// jobData is the job detail page.
type jobData struct {
	Job       *idemclient.Job
	Attempts  []*idemclient.Attempt
	Record    *idemclient.Record
	RecordErr string
	ReplayOf  string
	// ReplayOfJob: ReplayOf is a job id, linked; any other value (the
	// metadata is the client's) is shown as text.
	ReplayOfJob bool
	Finished    bool
	CanRetry    bool
	// CanResolve: the job is dead and not marked resolved yet.
	CanResolve bool
}

func (h *Handler) job(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	if _, err := strconv.ParseInt(id, 10, 64); err != nil {
		h.render(w, r, http.StatusBadRequest, "error", s, &errorPage{Title: "No such job",
			Message: fmt.Sprintf("%q is not a job id (job ids are numbers).", id)})
		return
	}
	cl := h.client(s)
	job, err := cl.GetJob(r.Context(), id)
	if err != nil {
		if errors.Is(err, idemtype.ErrNotFound) {
			h.render(w, r, http.StatusNotFound, "error", s, &errorPage{Title: "No such job",
				Message: "Job " + id + " does not exist in this tenant."})
			return
		}
		h.apiError(w, r, s, "Could not load job "+id, err)
		return
	}
	d := &jobData{Job: job, ReplayOf: replayOf(job)}
	if n, err := strconv.ParseInt(d.ReplayOf, 10, 64); err == nil && n > 0 {
		d.ReplayOfJob = true
	}
	st := idemtype.JobState(job.State)
	d.Finished = st == idemtype.StateCompleted || st == idemtype.StateDead || st == idemtype.StateCancelled
	d.CanRetry = st != idemtype.StateRunning
	d.CanResolve = st == idemtype.StateDead && job.ResolvedAt == nil
	if d.Attempts, err = cl.Attempts(r.Context(), id); err != nil {
		h.apiError(w, r, s, "Could not load the attempts of job "+id, err)
		return
	}
	if job.IdempotencyKey != "" {
		if d.Record, err = cl.GetRecord(r.Context(), job.IdempotencyKey); err != nil {
			d.RecordErr = problemText(err)
		}
	}
	h.render(w, r, http.StatusOK, "job", s, d)
}

// replayOf is metadata.replay_of of a replayed copy ("" otherwise).
func replayOf(j *idemclient.Job) string {
	var md struct {
		ReplayOf string `json:"replay_of"`
	}
	if len(j.Metadata) == 0 || json.Unmarshal(j.Metadata, &md) != nil {
		return ""
	}
	return md.ReplayOf
}

// jobAction is a button on the job page: cancel, retry, replay, or
// resolve a dead job with the form's note.
func (h *Handler) jobAction(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	back := Prefix + "jobs/" + url.PathEscape(id)
	cl := h.client(s)
	var err error
	var msg string
	switch r.PathValue("action") {
	case "cancel":
		_, err = cl.CancelJob(r.Context(), id)
		msg = "Job " + id + " cancelled."
	case "retry":
		_, err = cl.RetryJob(r.Context(), id, time.Time{})
		msg = "Job " + id + " will run again."
	case "resolve":
		_, err = cl.DLQResolve(r.Context(), id, r.PostForm.Get("note"))
		msg = "Job " + id + " resolved."
	case "replay":
		var job *idemclient.Job
		if job, err = cl.GetJob(r.Context(), id); err == nil {
			if job.IdempotencyKey == "" {
				err = errors.New("replay selects jobs by idempotency key, and this job has none")
				break
			}
			var res *idemclient.ReplayResult
			res, err = cl.ReplayReport(r.Context(), idemclient.Filter{Queue: job.Queue, Kind: job.Kind,
				IdempotencyKey: job.IdempotencyKey}, "")
			if err == nil && res.Enqueued == 0 && res.Skipped > 0 {
				err = errors.New("this job has not finished; a replay copies finished jobs (completed, dead or cancelled)")
			}
			msg = fmt.Sprintf("Replayed: %d new job(s) enqueued as copies.", res.Enqueued)
		}
	default:
		h.notFound(w, r)
		return
	}
	if err != nil {
		h.flash(w, r, "error", "Not done: "+problemText(err))
	} else {
		h.flash(w, r, "ok", msg)
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}
