package ui

import (
	"context"
	"encoding/json"
	"html/template"
	"net/http"
	"slices"
	"sort"
	"time"

	"github.com/idem-dev/idem/idemclient"
	"github.com/idem-dev/idem/idemtype"
)

// hourScan bounds the finished jobs one overview reads to chart the hour.
const hourScan = 1000

// queueRow is one queue on the overview.
type queueRow struct {
	Name  string
	Stats *idemclient.QueueStats
	// Completed1h and Dead1h count the jobs created in the last hour that
	// completed or died (from at most hourScan jobs of each).
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
	d := &overviewData{States: stateNames, Updated: formatTime(now), Refresh: int(h.cfg.Refresh.Milliseconds())}
	done, dead, err := h.lastHour(ctx, cl, now)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(st.Queues))
	for q := range st.Queues {
		names = append(names, q)
	}
	sort.Strings(names)
	for _, q := range names {
		row := queueRow{Name: q, Stats: st.Queues[q], Completed1h: count(done, q), Dead1h: count(dead, q)}
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

// lastHour lists the completed and dead jobs created in the last hour.
func (h *Handler) lastHour(ctx context.Context, cl *idemclient.Client, now time.Time) (done, dead []*idemclient.Job, err error) {
	get := func(state string) ([]*idemclient.Job, error) {
		jq := &jobQuery{Limit: hourScan}
		jq.list.States = []string{state}
		jq.list.Since = now.Add(-time.Hour)
		page, err := h.listJobs(ctx, cl, jq, false)
		if err != nil {
			return nil, err
		}
		return page.Jobs, nil
	}
	if done, err = get(string(idemtype.StateCompleted)); err != nil {
		return nil, nil, err
	}
	dead, err = get(string(idemtype.StateDead))
	return done, dead, err
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
	done, dead, err := h.lastHour(r.Context(), h.client(s), now.Add(time.Minute))
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if err != nil {
		w.WriteHeader(problemStatus(err))
		_ = json.NewEncoder(w).Encode(map[string]string{"error": problemText(err)})
		return
	}
	var out series
	start := now.Add(-59 * time.Minute)
	for i := range 60 {
		out.Minutes = append(out.Minutes, start.Add(time.Duration(i)*time.Minute).Unix())
	}
	out.Completed, out.Dead = buckets(done, start), buckets(dead, start)
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
