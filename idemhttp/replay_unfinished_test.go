package idemhttp_test

import (
	"testing"

	"github.com/idem-dev/idem/internal/dbtest"
)

// TestReplaySkipsUnfinishedJobs: POST /v1/jobs/replay copies only the
// finished jobs the filter selects (completed, dead, cancelled) and counts
// the unfinished ones it left in skipped; a filter that selects only
// unfinished jobs copies nothing (200, enqueued 0). Before the fix a job
// still available or running was copied: a keyless copy that ran beside
// the original.
func TestReplaySkipsUnfinishedJobs(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); testReplaySkipsUnfinishedJobs(t, openSQLite) })
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		dbtest.PostgresURL(t)
		testReplaySkipsUnfinishedJobs(t, openPostgres)
	})
}

func testReplaySkipsUnfinishedJobs(t *testing.T, open opener) {
	e := setup(t, open, nil)
	body := map[string]any{"kind": "ru", "queue": "ru", "idempotency_key": "ru-done"}
	done := e.enqueue(e.keyA, body)
	e.complete(e.keyA, e.claim(e.keyA, "ru"), map[string]any{"ok": true})
	dead := e.dead(e.keyA, "ru")
	body["idempotency_key"] = "ru-running"
	running := e.enqueue(e.keyA, body)
	if j := e.claim(e.keyA, "ru"); j["id"] != running {
		t.Fatalf("claimed %v, want %s", j["id"], running)
	}
	body["idempotency_key"] = "ru-available"
	e.enqueue(e.keyA, body)

	r := e.req("POST", "/v1/jobs/replay", e.keyA, map[string]any{"filter": map[string]any{"queue": "ru"}, "queue": "ru-copies"})
	expect(t, r, 200, "")
	if got := r.json(t); got["enqueued"] != float64(2) || got["skipped"] != float64(2) {
		t.Fatalf("replay: %s; want 2 enqueued (the completed and the dead job), 2 skipped", r.body)
	}
	r = e.req("GET", "/v1/jobs?queue=ru-copies", e.keyA, nil)
	expect(t, r, 200, "")
	copied := map[any]bool{}
	for _, j := range r.json(t)["jobs"].([]any) {
		copied[j.(map[string]any)["metadata"].(map[string]any)["replay_of"]] = true
	}
	if len(copied) != 2 || !copied[done] || !copied[dead] {
		t.Fatalf("copies of %v; want of %s and %s", copied, done, dead)
	}

	r = e.req("POST", "/v1/jobs/replay", e.keyA, map[string]any{"filter": map[string]any{"queue": "ru", "state": "running,available"}})
	expect(t, r, 200, "")
	if got := r.json(t); got["enqueued"] != float64(0) || got["skipped"] != float64(2) {
		t.Fatalf("replay of unfinished jobs only: %s; want 0 enqueued, 2 skipped", r.body)
	}
}
