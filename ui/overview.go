package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/idem-dev/idem/idemclient"
	"github.com/idem-dev/idem/idemtype"
)

// queueRow is one queue on the overview.
type queueRow struct {
	Name  string
	Stats *idemclient.QueueStats
	// Completed1h and Dead1h count the jobs that completed or died in the
	// last hour, whenever created (from at most Config.HourScan of each).
	Completed1h, Dead1h int
	FailureRate1h       *float64
}

// overviewData is the overview page and its live fragment.
type overviewData struct {
	States  []string
	Queues  []queueRow
	Checks  []checkRow
	Status  string
	Health  string // why checks are missing, when they are
	Updated string
	Refresh int
	// HourScan is the most jobs of each final state the last-hour figures
	// read; HourCapped is set when more than that finished in the hour, so
	// the figures are low.
	HourScan   string
	HourCapped bool
}

type checkRow struct {
	Name   string
	Status string
	Value  float64
	Limit  float64
	Detail string
}

// series is the per-minute chart data of the last hour (overview.json).
type series struct {
	Minutes   []int64 `json:"minutes"` // unix seconds of each minute
	Completed []int   `json:"completed"`
	Dead      []int   `json:"dead"`
	// Capped is set when more jobs finished in the hour than the chart
	// read (Scan of each state): its counts are low.
	Capped bool `json:"capped"`
	Scan   int  `json:"scan"`
}

// hourJobs is what the overview read of the last hour: the jobs that
// completed and died in it, newest first, and whether more did.
type hourJobs struct {
	done, dead []*idemclient.Job
	capped     bool
}

var stateNames = func() []string {
	out := make([]string, len(idemtype.AllStates))
	for i, s := range idemtype.AllStates {
		out[i] = string(s)
	}
	return out
}()

func (h *Handler) overview(w http.ResponseWriter, r *http.Request, s *session) {
	d, err := h.overviewData(r.Context(), s)
	if err != nil {
		h.apiError(w, r, s, "Could not load the overview", err)
		return
	}
	h.render(w, r, http.StatusOK, "overview", s, d)
}

// overviewQueues is the live part of the overview, swapped in by htmx.
func (h *Handler) overviewQueues(w http.ResponseWriter, r *http.Request, s *session) {
	d, err := h.overviewData(r.Context(), s)
	if err != nil {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusOK) // keep polling; show the problem in place
		_, _ = w.Write([]byte(`<p class="msg error" role="alert">Could not refresh: ` +
			template.HTMLEscapeString(problemText(err)) + `</p>`))
		return
	}
	h.fragment(w, "overview", "live", d)
}

func (h *Handler) overviewData(ctx context.Context, s *session) (*overviewData, error) {
	cl := h.client(s)
	st, err := cl.Stats(ctx)
	if err != nil {
		return nil, err
	}
	now := h.cfg.Now().UTC()
	d := &overviewData{States: stateNames, Updated: formatTime(now), Refresh: int(h.cfg.Refresh.Milliseconds()),
		HourScan: thousands(h.cfg.HourScan)}
	hour, err := h.lastHour(ctx, cl, now)
	if err != nil {
		return nil, err
	}
	d.HourCapped = hour.capped
	names := make([]string, 0, len(st.Queues))
	for q := range st.Queues {
		names = append(names, q)
	}
	sort.Strings(names)
	for _, q := range names {
		row := queueRow{Name: q, Stats: st.Queues[q], Completed1h: count(hour.done, q), Dead1h: count(hour.dead, q)}
		if t := row.Completed1h + row.Dead1h; t > 0 {
			f := float64(row.Dead1h) / float64(t)
			row.FailureRate1h = &f
		}
		d.Queues = append(d.Queues, row)
	}
	h.health(ctx, cl, s, d)
	return d, nil
}

func count(jobs []*idemclient.Job, queue string) int {
	n := 0
	for _, j := range jobs {
		if j.Queue == queue {
			n++
		}
	}
	return n
}

// lastHour lists the jobs that completed and died in the hour before now
// (by finish time, however long ago they were created), at most
// Config.HourScan of each, the newest jobs first.
func (h *Handler) lastHour(ctx context.Context, cl *idemclient.Client, now time.Time) (*hourJobs, error) {
	out := &hourJobs{}
	for _, st := range []struct {
		state idemtype.JobState
		dst   *[]*idemclient.Job
	}{{idemtype.StateCompleted, &out.done}, {idemtype.StateDead, &out.dead}} {
		jq := &jobQuery{Limit: h.cfg.HourScan}
		jq.list.States = []string{string(st.state)}
		jq.list.FinishedSince = now.Add(-time.Hour)
		page, err := h.listJobs(ctx, cl, jq, false)
		if err != nil {
			return nil, fmt.Errorf("list the %s jobs of the last hour: %w", st.state, err)
		}
		*st.dst = page.Jobs
		out.capped = out.capped || page.NextCursor != ""
	}
	return out, nil
}

// thousands renders n with thousands separators ("1,000").
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// health fills the job health checks of GET /v1/health: server-wide, so
// shown to admin keys.
func (h *Handler) health(ctx context.Context, cl *idemclient.Client, s *session, d *overviewData) {
	if !s.admin {
		d.Health = "The server's health checks cover every tenant; sign in with an admin key to see them."
		return
	}
	rep, err := cl.HealthChecks(ctx)
	if rep == nil { // an unhealthy grade comes with its report and a 503
		d.Health = "Health checks are unavailable: " + problemText(err)
		return
	}
	d.Status = rep.Status
	for name, c := range rep.Checks {
		d.Checks = append(d.Checks, checkRow{Name: name, Status: c.Status, Value: c.Value, Limit: c.Threshold, Detail: c.Detail})
	}
	slices.SortFunc(d.Checks, func(a, b checkRow) int {
		if a.Name < b.Name {
			return -1
		}
		return 1
	})
}

// overviewJSON is the chart data: jobs per minute over the last hour.
func (h *Handler) overviewJSON(w http.ResponseWriter, r *http.Request, s *session) {
	now := h.cfg.Now().UTC().Truncate(time.Minute)
	hour, err := h.lastHour(r.Context(), h.client(s), now.Add(time.Minute))
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if err != nil {
		w.WriteHeader(problemStatus(err))
		_ = json.NewEncoder(w).Encode(map[string]string{"error": problemText(err)})
		return
	}
	out := series{Capped: hour.capped, Scan: h.cfg.HourScan}
	start := now.Add(-59 * time.Minute)
	for i := range 60 {
		out.Minutes = append(out.Minutes, start.Add(time.Duration(i)*time.Minute).Unix())
	}
	out.Completed, out.Dead = buckets(hour.done, start), buckets(hour.dead, start)
	_ = json.NewEncoder(w).Encode(out)
}

// buckets counts jobs per minute of finish from start (60 minutes).
func buckets(jobs []*idemclient.Job, start time.Time) []int {
	out := make([]int, 60)
	for _, j := range jobs {
		t := j.CreatedAt
		if j.FinishedAt != nil {
			t = *j.FinishedAt
		}
		i := int(t.Sub(start) / time.Minute)
		if i >= 0 && i < 60 {
			out[i]++
		}
	}
	return out
}
