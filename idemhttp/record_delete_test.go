package idemhttp_test

import (
	"testing"

	"github.com/idem-dev/idem/internal/dbtest"
)

// TestRecordDeleteOfRunningJob: DELETE /v1/idempotency/{key} of the record
// of a job that runs is refused (409 idempotency-key-in-progress), so a new
// job of the key is not created and claimed beside the running one; once
// the job completed the delete frees the key (204) and a new job of it is
// created (201).
func TestRecordDeleteOfRunningJob(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); testRecordDeleteOfRunningJob(t, openSQLite) })
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		dbtest.PostgresURL(t)
		testRecordDeleteOfRunningJob(t, openPostgres)
	})
}

func testRecordDeleteOfRunningJob(t *testing.T, open opener) {
	e := setup(t, open, nil)
	body := map[string]any{"kind": "k", "queue": "rd", "idempotency_key": "run-1"}
	id := e.enqueue(e.keyA, body)
	j := e.claim(e.keyA, "rd")
	if j["id"] != id {
		t.Fatalf("claimed %v, want job %s", j, id)
	}
	expect(t, e.req("DELETE", "/v1/idempotency/run-1", e.keyA, nil), 409, "/problems/idempotency-key-in-progress")
	r := e.req("POST", "/v1/jobs", e.keyA, body)
	expect(t, r, 200, "")
	if got := r.job(t)["id"]; got != id {
		t.Fatalf("a job of the key while the first runs: %v, want the existing %s", got, id)
	}
	e.claimNone(e.keyA, "rd")

	e.complete(e.keyA, j, map[string]any{"ok": true})
	expect(t, e.req("DELETE", "/v1/idempotency/run-1", e.keyA, nil), 204, "")
	r = e.req("POST", "/v1/jobs", e.keyA, body)
	expect(t, r, 201, "")
	if got := r.job(t)["id"]; got == id {
		t.Fatalf("no new job after the delete")
	}
}
