package idemhttp_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store"
)

// bothStores runs fn on SQLite and PostgreSQL, in parallel.
func bothStores(t *testing.T, fn func(t *testing.T, open opener)) {
	t.Helper()
	bothStoresOf(t, openPostgres, fn)
}

// bothStoresOf is bothStores with pg as PostgreSQL's opener.
func bothStoresOf(t *testing.T, pg opener, fn func(t *testing.T, open opener)) {
	t.Helper()
	for name, open := range map[string]opener{"sqlite": openSQLite, "postgres": pg} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if name == "postgres" {
				dbtest.PostgresURL(t) // skips loudly without a server
			}
			fn(t, open)
		})
	}
}

// TestLongPollTakesDueJobs (both stores, maintenance disabled: no promoter
// promotes or announces due jobs): a tenant's long-polling claim (with a
// kinds filter) on a queue whose only job is scheduled 300 ms ahead gets
// it at its run_at, and after a fail with retry_after 200ms gets its retry
// when due: within a poll, never before the run_at.
func TestLongPollTakesDueJobs(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, open opener) {
		e := setup(t, open, nil)
		runAt := time.Now().Add(300 * time.Millisecond).UTC()
		id := e.enqueue(e.keyA, map[string]any{"kind": "due", "queue": "due", "run_at": runAt.Format(time.RFC3339Nano)})
		claim := func(what string) map[string]any {
			t.Helper()
			r := e.req("POST", "/v1/claim", e.keyA, map[string]any{"queues": []string{"due"}, "kinds": []string{"due"},
				"worker_id": "w", "lease": "30s", "wait": "30s"})
			at := time.Now()
			expect(t, r, 200, "")
			jobs := r.json(t)["jobs"].([]any)
			if len(jobs) != 1 || jobs[0].(map[string]any)["id"] != id {
				t.Fatalf("%s: long poll got %s, want job %s", what, r.body, id)
			}
			j := jobs[0].(map[string]any)
			due, err := time.Parse(time.RFC3339Nano, j["run_at"].(string))
			if err != nil {
				t.Fatal(err)
			}
			started, err := time.Parse(time.RFC3339Nano, j["started_at"].(string))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: started %v after its run_at, answered %v after it", what, started.Sub(due), at.Sub(due))
			if started.Before(due) {
				t.Errorf("%s: started at %v, before its run_at %v", what, started, due)
			}
			if at.Sub(due) > 10*time.Second {
				t.Errorf("%s: claimed %v after its run_at; want within a poll (100 ms), at most 10s", what, at.Sub(due))
			}
			return j
		}
		j := claim("scheduled")
		r := e.req("POST", "/v1/jobs/"+id+"/fail", e.keyA, map[string]any{"lease_token": j["lease_token"], "error": "again",
			"retry_after": "200ms"})
		expect(t, r, 200, "")
		if s := r.json(t)["state"]; s != "retryable" {
			t.Fatalf("failed job %v, want retryable", s)
		}
		if j := claim("retry"); j["attempt"] != float64(2) {
			t.Fatalf("retry claimed at attempt %v, want 2", j["attempt"])
		}
	})
}

// jobOf reads job id of tenant a from the store.
func (e *env) jobOf(id string) map[string]any {
	e.t.Helper()
	r := e.req("GET", "/v1/jobs/"+id, e.keyA, nil)
	expect(e.t, r, 200, "")
	return r.json(e.t)
}

// TestPullStaleLeaseAfterRescue (both stores): a worker whose lease ended
// and whose job the rescuer took back and another worker claimed gets a
// lease-lost problem for its heartbeat, complete and fail, which change
// nothing; the new worker's complete stands, its repeat with the same
// Idempotency-Key replays it, and the old worker's complete after it is
// refused too: one completion, with the new worker's result.
func TestPullStaleLeaseAfterRescue(t *testing.T) {
	t.Parallel()
	// The caller's clock decides lease ends on both stores, and the test
	// moves it past the lease instead of waiting.
	bothStoresOf(t, openPostgresCallerClock, func(t *testing.T, open opener) {
		var clock shiftClock
		e := setup(t, open, &setupOpts{clientCfg: clock.clientCfg()})
		ctx := context.Background()
		id := e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "resc", "max_attempts": 5})
		r := e.req("POST", "/v1/claim", e.keyA, map[string]any{"queues": []string{"resc"}, "worker_id": "old", "lease": "1s"})
		expect(t, r, 200, "")
		old := r.json(t)["jobs"].([]any)[0].(map[string]any)
		oldTok := old["lease_token"].(string)
		clock.shift(2 * time.Second) // past the lease's end
		// Expired, not yet rescued: a heartbeat does not revive it.
		r = e.req("POST", "/v1/jobs/"+id+"/heartbeat", e.keyA, map[string]any{"lease_token": oldTok})
		expect(t, r, 409, "/problems/lease-lost")
		if d := r.json(t)["detail"].(string); !strings.Contains(d, "lease ended") {
			t.Errorf("heartbeat after the lease's end: detail %q does not say the lease ended", d)
		}
		if got, err := e.st.JobRescue(ctx, &store.JobRescueParams{Now: clock.now(), Limit: 10}); err != nil || len(got) != 1 {
			t.Fatalf("rescue of the expired lease: %v %v, want the job", got, err)
		}
		r = e.req("POST", "/v1/claim", e.keyA, map[string]any{"queues": []string{"resc"}, "worker_id": "new", "lease": "60s", "wait": "20s"})
		expect(t, r, 200, "")
		jobs := r.json(t)["jobs"].([]any)
		if len(jobs) != 1 {
			t.Fatalf("re-claim %s", r.body)
		}
		newTok := jobs[0].(map[string]any)["lease_token"].(string)
		if jobs[0].(map[string]any)["attempt"] != float64(2) || newTok == oldTok {
			t.Fatalf("re-claim %s, want attempt 2 with a new token", r.body)
		}
		path := "/v1/jobs/" + id
		for _, c := range []struct{ op, body string }{{"heartbeat", `{"lease_token":"` + oldTok + `"}`},
			{"complete", `{"lease_token":"` + oldTok + `","result":"old"}`}, {"fail", `{"lease_token":"` + oldTok + `","error":"old"}`}} {
			r := e.req("POST", path+"/"+c.op, e.keyA, c.body)
			expect(t, r, 409, "/problems/lease-lost")
			if d := r.json(t)["detail"].(string); !strings.Contains(d, "another lease") {
				t.Errorf("stale %s: detail %q does not say the job runs under another lease", c.op, d)
			}
		}
		if j := e.jobOf(id); j["state"] != "running" || j["attempt"] != float64(2) || j["worker_id"] != "new" {
			t.Fatalf("after the old worker's calls: %v; want running attempt 2 of worker new", j)
		}
		expect(t, e.req("POST", path+"/heartbeat", e.keyA, map[string]any{"lease_token": newTok}), 200, "")
		done := map[string]any{"lease_token": newTok, "result": "new"}
		first := e.req("POST", path+"/complete", e.keyA, done, "Idempotency-Key", "done-1")
		expect(t, first, 200, "")
		again := e.req("POST", path+"/complete", e.keyA, done, "Idempotency-Key", "done-1")
		expect(t, again, 200, "")
		if again.header.Get("Idempotent-Replayed") != "true" || string(again.body) != string(first.body) {
			t.Fatalf("repeat: replayed %q, body %s; want the first answer %s replayed", again.header.Get("Idempotent-Replayed"), again.body, first.body)
		}
		expect(t, e.req("POST", path+"/complete", e.keyA, map[string]any{"lease_token": oldTok, "result": "old"}), 409, "/problems/lease-lost")
		r = e.req("POST", path+"/fail", e.keyA, map[string]any{"lease_token": newTok, "error": "late"})
		expect(t, r, 409, "/problems/lease-lost")
		if d := r.json(t)["detail"].(string); !strings.Contains(d, "completed") {
			t.Errorf("fail after the complete: detail %q does not say the job is completed", d)
		}
		j := e.jobOf(id)
		if j["state"] != "completed" || j["result"] != "new" || j["attempt"] != float64(2) {
			t.Fatalf("job %v; want completed at attempt 2 with the new worker's result", j)
		}
		a := e.req("GET", path+"/attempts", e.keyA, nil).json(t)["attempts"].([]any)
		completed := 0
		for _, x := range a {
			if x.(map[string]any)["outcome"] == "completed" {
				completed++
			}
		}
		if len(a) != 2 || completed != 1 {
			t.Fatalf("attempts %v; want 2, one completed", a)
		}
	})
}

// TestPullCompleteRacingCancel (both stores): a complete and a cancel of a
// claimed job sent at once: exactly one wins. A won complete keeps its
// result (the cancel is a wrong-state problem); a won cancel leaves no
// result (the complete is a lease-lost problem). Never both, never
// neither, and the job finishes once.
func TestPullCompleteRacingCancel(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, open opener) {
		e := setup(t, open, nil)
		wins := map[string]int{}
		for i := range 20 {
			id := e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "race"})
			j := e.claim(e.keyA, "race")
			if j["id"] != id {
				t.Fatalf("claimed %v, want %s", j["id"], id)
			}
			var wg sync.WaitGroup
			var done, cancel *resp
			wg.Add(2)
			go func() {
				defer wg.Done()
				done = e.req("POST", "/v1/jobs/"+id+"/complete", e.keyA, map[string]any{"lease_token": j["lease_token"], "result": i})
			}()
			go func() {
				defer wg.Done()
				cancel = e.req("POST", "/v1/jobs/"+id+"/cancel", e.keyA, nil)
			}()
			wg.Wait()
			final := e.jobOf(id)
			switch {
			case done.status == 200 && cancel.status != 200:
				expect(t, cancel, 409, "/problems/wrong-state")
				if final["state"] != "completed" || fmt.Sprint(final["result"]) != strconv.Itoa(i) {
					t.Fatalf("complete won, job %v", final)
				}
				wins["complete"]++
			case cancel.status == 200 && done.status != 200:
				expect(t, done, 409, "/problems/lease-lost")
				if d := done.json(t)["detail"].(string); !strings.Contains(d, "cancelled") {
					t.Fatalf("complete after a won cancel: detail %q does not say the job was cancelled", d)
				}
				if final["state"] != "cancelled" || final["result"] != nil {
					t.Fatalf("cancel won, job %v", final)
				}
				wins["cancel"]++
			default:
				t.Fatalf("complete %d %s, cancel %d %s: want exactly one to win", done.status, done.body, cancel.status, cancel.body)
			}
		}
		t.Logf("wins %v", wins)
	})
}
