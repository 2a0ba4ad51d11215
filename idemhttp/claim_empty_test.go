package idemhttp_test

import (
	"fmt"
	"strings"
	"testing"
)

// TestEmptyClaimNotStored: a claim that finds nothing is not stored under
// its Idempotency-Key. A pull worker polls an idle queue with a new key
// each time (the clients do): every empty answer kept for a day filled the
// records and the cache figures (GET /v1/idempotency) with nothing worth
// replaying. The repeat of an empty claim runs again and claims what is
// there by then; a claim that took jobs is still replayed (claim_replay_test.go).
func TestEmptyClaimNotStored(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]opener{"sqlite": openSQLite, "postgres": openPostgres} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, open, nil)
			entries := func() float64 {
				r := e.req("GET", "/v1/idempotency", e.keyA, nil)
				expect(t, r, 200, "")
				n, _ := r.json(t)["entries"].(float64)
				return n
			}
			before := entries()
			claim := map[string]any{"queues": []string{"idle"}, "worker_id": "w1", "limit": 1, "lease": "60s"}
			first := e.req("POST", "/v1/claim", e.keyA, claim, "Idempotency-Key", "poll-1")
			expect(t, first, 200, "")
			if jobs, _ := first.json(t)["jobs"].([]any); len(jobs) != 0 {
				t.Fatalf("claim of an empty queue: %v", jobs)
			}
			if got := entries(); got != before {
				t.Errorf("idempotency entries %v after an empty claim, want %v", got, before)
			}
			id := e.enqueue(e.keyA, map[string]any{"kind": "pull", "queue": "idle"})
			again := e.req("POST", "/v1/claim", e.keyA, claim, "Idempotency-Key", "poll-1")
			expect(t, again, 200, "")
			if got := again.header.Get("Idempotent-Replayed"); got != "" {
				t.Errorf("repeat of an empty claim: Idempotent-Replayed %q, want none", got)
			}
			jobs, _ := again.json(t)["jobs"].([]any)
			if len(jobs) != 1 || jobs[0].(map[string]any)["id"] != id {
				t.Fatalf("repeat of an empty claim after job %s was enqueued got %v", id, jobs)
			}
			// That claim took a job: it is kept, and its repeat replays it.
			third := e.req("POST", "/v1/claim", e.keyA, claim, "Idempotency-Key", "poll-1")
			expect(t, third, 200, "")
			if got := third.header.Get("Idempotent-Replayed"); got != "true" {
				t.Errorf("repeat of a claim that took a job: Idempotent-Replayed %q, want true", got)
			}
		})
	}
}

// TestClaimEmptyKindsRefused: "kinds": [] is refused with a 400 naming the
// field. It named no kind at all: PostgreSQL claimed nothing, SQLite any
// kind (now nothing, as the store contract says); absent is any kind.
func TestClaimEmptyKindsRefused(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	e.enqueue(e.keyA, map[string]any{"kind": "pull", "queue": "kinds"})
	r := e.req("POST", "/v1/claim", e.keyA, map[string]any{"queues": []string{"kinds"}, "kinds": []string{}, "worker_id": "w1"})
	expect(t, r, 400, "")
	if p := r.json(t); !strings.Contains(fmt.Sprint(p["detail"]), "kinds") {
		t.Errorf("problem %v does not name kinds", p)
	}
	r = e.req("POST", "/v1/claim", e.keyA, map[string]any{"queues": []string{"kinds"}, "worker_id": "w1"})
	expect(t, r, 200, "")
	if jobs, _ := r.json(t)["jobs"].([]any); len(jobs) != 1 {
		t.Errorf("claim without kinds: %v, want the job", jobs)
	}
}
