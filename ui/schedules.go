package ui

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/idem-dev/idem/idemclient"
	"github.com/idem-dev/idem/idemhttp/wire"
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
	name, ok := h.scheduleName(w, r)
	if !ok {
		return
	}
	res, err := h.client(s).TriggerSchedule(r.Context(), name, "")
	if err != nil {
		h.flash(w, r, "error", "Schedule "+name+" not triggered: "+problemText(err))
		http.Redirect(w, r, Prefix+"schedules", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, Prefix+"schedules?"+url.Values{"triggered": {name}, "job": {res.Job.ID}}.Encode(),
		http.StatusSeeOther)
}

// schedulePut creates or replaces a schedule from the page's form ("Save
// schedule"): the API validates it, and its refusal, naming the field, is
// the page's message; nothing is stored then.
func (h *Handler) schedulePut(w http.ResponseWriter, r *http.Request, s *session) {
	name := strings.TrimSpace(r.PostForm.Get("name"))
	req, err := scheduleForm(r.PostForm)
	if err == nil && name == "" {
		err = errors.New("name the schedule")
	}
	var sc *idemclient.Schedule
	if err == nil {
		sc, err = h.client(s).PutSchedule(r.Context(), name, req)
	}
	switch {
	case err != nil:
		h.flash(w, r, "error", "Schedule "+name+" not saved: "+problemText(err))
	case sc.NextFireAt != nil:
		h.flash(w, r, "ok", "Schedule "+sc.Name+" saved: next firing "+formatTime(*sc.NextFireAt)+".")
	default:
		h.flash(w, r, "ok", "Schedule "+sc.Name+" saved.")
	}
	http.Redirect(w, r, Prefix+"schedules", http.StatusSeeOther)
}

// scheduleForm reads the schedule form: the fields of PUT
// /v1/schedules/{name}, with retry as a list of delays ("1s, 5s, 25s",
// no jitter) and retry attempts. Only what the API cannot see (args that
// are not JSON, numbers that are not numbers) is refused here.
func scheduleForm(f url.Values) (*idemclient.ScheduleRequest, error) {
	get := func(k string) string { return strings.TrimSpace(f.Get(k)) }
	req := &idemclient.ScheduleRequest{Cron: get("cron"), Timezone: get("timezone"), Grain: get("grain"),
		Missed: get("missed"), Queue: get("queue"), Kind: get("kind")}
	if every := get("every"); every != "" {
		req.Every = &every
	}
	if args := get("args"); args != "" {
		if !json.Valid([]byte(args)) {
			return nil, errors.New("args: not valid JSON")
		}
		req.Args = json.RawMessage(args)
	}
	if n := get("max_attempts"); n != "" {
		v, err := strconv.Atoi(n)
		if err != nil {
			return nil, errors.New("max attempts: not a whole number")
		}
		req.MaxAttempts = v
	}
	if delays := get("retry_delays"); delays != "" {
		none := 0.0
		req.Retry = &wire.RetrySpec{Jitter: &none}
		for d := range strings.SplitSeq(delays, ",") {
			req.Retry.Delays = append(req.Retry.Delays, strings.TrimSpace(d))
		}
	}
	return req, nil
}

// scheduleDelete deletes a schedule ("Delete"); its jobs stay.
func (h *Handler) scheduleDelete(w http.ResponseWriter, r *http.Request, s *session) {
	name, ok := h.scheduleName(w, r)
	if !ok {
		return
	}
	if err := h.client(s).DeleteSchedule(r.Context(), name); err != nil {
		h.flash(w, r, "error", "Schedule "+name+" not deleted: "+problemText(err))
	} else {
		h.flash(w, r, "ok", "Schedule "+name+" deleted; the jobs it made are kept.")
	}
	http.Redirect(w, r, Prefix+"schedules", http.StatusSeeOther)
}

// scheduleName is the schedule a Trigger now or Delete form names: in
// the path, or (the page's forms) in the body; without one the answer is
// a message on the schedules page and ok is false.
func (h *Handler) scheduleName(w http.ResponseWriter, r *http.Request) (string, bool) {
	if name := r.PathValue("name"); name != "" {
		return name, true
	}
	if name := r.PostForm.Get("name"); name != "" {
		return name, true
	}
	h.flash(w, r, "error", "Name the schedule.")
	http.Redirect(w, r, Prefix+"schedules", http.StatusSeeOther)
	return "", false
}

// retryText describes a schedule's own retry policy for the page.
func retryText(p *wire.RetrySpec) string {
	if p == nil {
		return "the queue's"
	}
	if len(p.Delays) > 0 {
		return strings.Join(p.Delays, ", ")
	}
	parts := []string{}
	if p.Base != nil {
		parts = append(parts, "from "+*p.Base)
	}
	if p.Factor != nil {
		parts = append(parts, "×"+strconv.FormatFloat(*p.Factor, 'g', -1, 64))
	}
	if p.Max != nil {
		parts = append(parts, "up to "+*p.Max)
	}
	if len(parts) == 0 {
		return "defaults"
	}
	return strings.Join(parts, " ")
}
