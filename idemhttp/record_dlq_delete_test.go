package idemhttp_test

import (
	"testing"

	"github.com/idem-dev/idem/internal/dbtest"
)

// TestRecordAfterDLQDelete: the record of a keyed job that died and was
// deleted from the dead-letter queue (DELETE /v1/dlq/{id}) inside its
// dedup window reads failed, naming the deleted job, as API.md says of a
// key whose job is dead without a result — not in_progress. With a dedup
// window of 0 the key stopped blocking when its job died: its record is
// gone (404) before and after the delete. After the delete the key takes
// a new job (201), and the record then reads in_progress naming it.
func TestRecordAfterDLQDelete(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); testRecordAfterDLQDelete(t, openSQLite) })
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		dbtest.PostgresURL(t)
		testRecordAfterDLQDelete(t, openPostgres)
	})
}

func testRecordAfterDLQDelete(t *testing.T, open opener) {
	e := setup(t, open, nil)
	for _, window := range []string{"", "0s"} {
		key := "dlq-del-" + window
		body := map[string]any{"kind": "k", "queue": "dd" + window, "idempotency_key": key}
		if window != "" {
			body["dedup_window"] = window
		}
		id := e.enqueue(e.keyA, body)
		j := e.claim(e.keyA, "dd"+window)
		if j["id"] != id {
			t.Fatalf("claimed %v, want job %s", j["id"], id)
		}
		expect(t, e.req("POST", "/v1/jobs/"+id+"/fail", e.keyA, map[string]any{"lease_token": j["lease_token"],
			"error": "boom", "retry": false}), 200, "")
		before := e.req("GET", "/v1/idempotency/"+key, e.keyA, nil)
		expect(t, e.req("DELETE", "/v1/dlq/"+id, e.keyA, nil), 204, "")
		after := e.req("GET", "/v1/idempotency/"+key, e.keyA, nil)
		if window == "0s" {
			if before.status != 404 || after.status != 404 {
				t.Errorf("window 0: record before the delete %d %s, after %d %s; want 404 both",
					before.status, before.body, after.status, after.body)
			}
		} else {
			for name, r := range map[string]*resp{"before the delete": before, "after the delete": after} {
				expect(t, r, 200, "")
				rec := r.json(t)
				if rec["status"] != "failed" || rec["job_id"] != id || rec["result_hash"] != nil {
					t.Errorf("record %s: %s; want failed naming job %s", name, r.body, id)
				}
			}
		}
		r := e.req("POST", "/v1/jobs", e.keyA, body)
		expect(t, r, 201, "")
		fresh := r.job(t)["id"]
		if fresh == id {
			t.Fatalf("window %q: the key answered with the deleted job", window)
		}
		r = e.req("GET", "/v1/idempotency/"+key, e.keyA, nil)
		expect(t, r, 200, "")
		if rec := r.json(t); rec["status"] != "in_progress" || rec["job_id"] != fresh {
			t.Errorf("window %q: record after the new job: %s; want in_progress naming %v", window, r.body, fresh)
		}
	}
}
