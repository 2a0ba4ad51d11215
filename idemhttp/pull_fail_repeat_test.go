package idemhttp_test

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestPullFailRepeatedAfterLostAnswer (both stores): a pull worker whose
// fail committed but whose answer was lost (the request answered an
// error) retries the same fail with the same lease token and error,
// without an Idempotency-Key: it is answered as the fail was, 200 and the
// job (retryable, or dead for retry:false), as a repeated complete is,
// and writes nothing. The same fail with another error, or after the job
// was claimed again (a new lease), is still a 409 lease-lost. Before, each
// repeat answered 409.
func TestPullFailRepeatedAfterLostAnswer(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]opener{"sqlite": openSQLite, "postgres": openPostgres} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e, lf := lostFinishServer(t, name, open)
			lostFail := func(queue string, body map[string]any) (string, map[string]any) {
				t.Helper()
				id := e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": queue, "max_attempts": 3})
				j := e.claim(e.keyA, queue)
				body["lease_token"] = j["lease_token"]
				lf.lose.Store(true)
				r := e.req("POST", "/v1/jobs/"+id+"/fail", e.keyA, body)
				lf.lose.Store(false)
				if r.status < 500 {
					t.Fatalf("fail with its answer lost: %d %s, want a server error", r.status, r.body)
				}
				return id, j
			}
			repeatOK := func(id string, body map[string]any, state string) {
				t.Helper()
				for range 2 {
					r := e.req("POST", "/v1/jobs/"+id+"/fail", e.keyA, body)
					expect(t, r, 200, "")
					got := r.json(t)
					if got["state"] != state || got["last_error"] != body["error"] || got["attempt"] != float64(1) {
						t.Fatalf("repeated fail answered %s, want the job %s after its first attempt", r.body, state)
					}
					// The answer of a fail: the job as it reads now.
					now := e.req("GET", "/v1/jobs/"+id, e.keyA, nil)
					if !sameJSON(t, r.body, now.body) {
						t.Fatalf("repeated fail answered\n%s\nthe job reads\n%s", r.body, now.body)
					}
				}
				if as := e.req("GET", "/v1/jobs/"+id+"/attempts", e.keyA, nil).json(t)["attempts"].([]any); len(as) != 1 {
					t.Fatalf("%d attempts after the repeats, want 1", len(as))
				}
			}

			retry := map[string]any{"error": "boom", "error_code": "E_TIMEOUT"}
			id, _ := lostFail("fr", retry)
			repeatOK(id, retry, "retryable")
			other := map[string]any{"lease_token": retry["lease_token"], "error": "bang", "error_code": "E_TIMEOUT"}
			expect(t, e.req("POST", "/v1/jobs/"+id+"/fail", e.keyA, other), 409, "/problems/lease-lost")

			dead := map[string]any{"error": "fatal", "retry": false}
			id, _ = lostFail("fd", dead)
			repeatOK(id, dead, "dead")

			// Claimed again (a new lease) before the retry came: the old
			// lease's fail is refused.
			moved := map[string]any{"error": "boom", "retry_after": "0s"}
			id, _ = lostFail("fm", moved)
			if j := e.claim(e.keyA, "fm"); j["id"] != id || j["lease_token"] == moved["lease_token"] {
				t.Fatalf("claim again: %v", j)
			}
			expect(t, e.req("POST", "/v1/jobs/"+id+"/fail", e.keyA, moved), 409, "/problems/lease-lost")
		})
	}
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("decode %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}
