package idemhttp_test

import (
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/dbtest"
)

// Issue 8 item 1: the records of the Idempotency-Key middleware and the
// idempotency keys of jobs are kept apart, whatever a caller writes as a key.
func TestKeyNamespacesSQLite(t *testing.T) {
	t.Parallel()
	testKeyNamespaces(t, openSQLite)
}

func TestKeyNamespacesPostgres(t *testing.T) {
	t.Parallel()
	dbtest.PostgresURL(t)
	testKeyNamespaces(t, openPostgres)
}

func testKeyNamespaces(t *testing.T, open opener) {
	e := setup(t, open, nil)
	// The middleware stores the response of a cancel, a retry and a claim
	// under the Idempotency-Key K.
	id := e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "q0"})
	expect(t, e.req("POST", "/v1/jobs/"+id+"/cancel", e.keyA, nil, "Idempotency-Key", "K"), 200, "")
	expect(t, e.req("POST", "/v1/jobs/"+id+"/retry", e.keyA, nil, "Idempotency-Key", "R"), 200, "")
	expect(t, e.req("POST", "/v1/claim", e.keyA, map[string]any{"queues": []string{"q0"}, "worker_id": "w"},
		"Idempotency-Key", "C"), 200, "")

	for _, k := range []string{"http:K", "http:R", "http:C", "K"} {
		t.Run("job with key "+k+" runs", func(t *testing.T) {
			queue := "q-" + strings.ReplaceAll(k, ":", "-")
			r := e.req("POST", "/v1/jobs", e.keyA, map[string]any{"kind": "k", "queue": queue, "idempotency_key": k})
			expect(t, r, 201, "")
			j := e.claim(e.keyA, queue)
			if j["state"] != "running" || j["lease_token"] == nil || j["idempotency_key"] != k {
				t.Fatalf("job with key %q was not handed to a worker: %v", k, j)
			}
			jid := j["id"].(string)
			r = e.req("POST", "/v1/jobs/"+jid+"/complete", e.keyA, map[string]any{
				"lease_token": j["lease_token"], "result": map[string]any{"ran": k}})
			expect(t, r, 200, "")
			g := e.req("GET", "/v1/jobs/"+jid, e.keyA, nil).json(t)
			if g["was_cached"] == true || g["state"] != "completed" {
				t.Fatalf("job %v", g)
			}
		})
	}
}
