package ui_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemclient"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/store/sqlitestore"
	"github.com/idem-dev/idem/ui"
)

// clockEnv is env with one settable clock for the server and the
// dashboard, and the dashboard's last-hour scan bounded to hourScan.
func clockEnv(t *testing.T, clock *atomic.Int64, hourScan int) *env {
	t.Helper()
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	st, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "idem.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	client, err := idem.NewClient(st, &idem.Config{DisableMaintenance: true, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	api, err := idemhttp.NewServer(client, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := ui.New(api, &ui.Config{Now: now, HourScan: hourScan})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e := &env{t: t, st: st, srv: srv, api0: api}
	e.keyA = e.newKey("a", false)
	return e
}

// finishAt enqueues a job of queue at created, claims it a second before
// finished and completes it (or fails it for good) at finished.
func finishAt(t *testing.T, e *env, clock *atomic.Int64, queue string, created, finished time.Time, dead bool) {
	t.Helper()
	ctx := context.Background()
	cl := e.api(e.keyA)
	clock.Store(created.UnixNano())
	res, err := cl.Enqueue(ctx, &idemclient.EnqueueRequest{Queue: queue, Kind: "k", Args: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	clock.Store(finished.Add(-time.Second).UnixNano())
	jobs, err := cl.Claim(ctx, &idemclient.ClaimRequest{Queues: []string{queue}, WorkerID: "w", Lease: time.Minute})
	if err != nil || len(jobs) != 1 || jobs[0].ID != res.Job.ID {
		t.Fatalf("claim: %v %v", jobs, err)
	}
	clock.Store(finished.UnixNano())
	if dead {
		_, err = cl.Fail(ctx, jobs[0].ID, jobs[0].LeaseToken, &idemclient.FailRequest{Error: "boom", NoRetry: true})
	} else {
		_, err = cl.Complete(ctx, jobs[0].ID, jobs[0].LeaseToken, json.RawMessage(`{}`))
	}
	if err != nil {
		t.Fatal(err)
	}
}

// hourCells returns the Completed 1h and Dead 1h cells of queue's row.
func hourCells(t *testing.T, page, queue string) (string, string) {
	t.Helper()
	row := regexp.MustCompile(`(?s)<tr data-queue="` + regexp.QuoteMeta(queue) + `">.*?</tr>`).FindString(page)
	m := regexp.MustCompile(`<td>(\d+)</td><td>(\d+)</td><td>[^<]*</td><td>[^<]*</td></tr>$`).FindStringSubmatch(row)
	if m == nil {
		t.Fatalf("no 1h cells for %s in:\n%s", queue, row)
	}
	return m[1], m[2]
}

// TestOverviewLastHourByFinish: the last-hour figures and the chart count
// the jobs that finished in the hour, those created before it included,
// and not those that finished before it; the page says how many jobs they
// are based on, and says so plainly when more finished than it read.
func TestOverviewLastHourByFinish(t *testing.T) {
	t.Parallel()
	var clock atomic.Int64
	e := clockEnv(t, &clock, 3)
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	finishAt(t, e, &clock, "mail", now.Add(-3*time.Hour), now.Add(-10*time.Minute), false) // old, finished in the hour
	finishAt(t, e, &clock, "mail", now.Add(-5*time.Minute), now.Add(-4*time.Minute), false)
	finishAt(t, e, &clock, "mail", now.Add(-2*time.Hour), now.Add(-61*time.Minute), false) // finished before the hour
	finishAt(t, e, &clock, "mail", now.Add(-90*time.Minute), now.Add(-30*time.Minute), true)
	clock.Store(now.UnixNano())
	a := e.login(e.keyA)

	page := body(t, e.get("/ui/overview/queues", a))
	if done, dead := hourCells(t, page, "mail"); done != "2" || dead != "1" {
		t.Errorf("mail completed/dead 1h = %s/%s, want 2/1:\n%s", done, dead, page)
	}
	if !strings.Contains(page, "based on the latest 3 completed and 3 dead jobs") || strings.Contains(page, "the 1h figures and the chart are low") {
		t.Errorf("the page does not say what the 1h figures are based on, or says they are capped:\n%s", page)
	}
	var s struct {
		Minutes         []int64
		Completed, Dead []int
		Capped          bool
	}
	if err := json.Unmarshal([]byte(body(t, e.get("/ui/overview.json", a))), &s); err != nil {
		t.Fatal(err)
	}
	sum := func(xs []int) (n int) {
		for _, x := range xs {
			n += x
		}
		return n
	}
	if sum(s.Completed) != 2 || sum(s.Dead) != 1 || s.Capped {
		t.Errorf("chart: completed %v dead %v capped %v, want 2, 1 and not capped", s.Completed, s.Dead, s.Capped)
	}

	// Two more completed in the hour: four, more than the three read.
	finishAt(t, e, &clock, "mail", now.Add(-50*time.Minute), now.Add(-20*time.Minute), false)
	finishAt(t, e, &clock, "mail", now.Add(-3*time.Minute), now.Add(-2*time.Minute), false)
	clock.Store(now.UnixNano())
	page = body(t, e.get("/ui/overview/queues", a))
	if done, _ := hourCells(t, page, "mail"); done != "3" {
		t.Errorf("capped mail completed 1h = %s, want 3 (the scan bound)", done)
	}
	if !strings.Contains(page, "the 1h figures and the chart are low") {
		t.Errorf("a capped count is not shown as capped:\n%s", page)
	}
	if err := json.Unmarshal([]byte(body(t, e.get("/ui/overview.json", a))), &s); err != nil || !s.Capped {
		t.Errorf("overview.json of a capped hour: capped %v, %v", s.Capped, err)
	}
}
