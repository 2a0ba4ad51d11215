package idemhttp_test

import (
	"strings"
	"testing"
)

// TestEnqueueValidatedByTheClient: POST /v1/jobs leaves the checks of the
// job's fields (names, keys, args, ranges) to Client.EnqueueRaw, which runs
// them before writing anything, rather than validating twice. Each refusal
// is still a 400 problem naming the field, with and without an
// Idempotency-Key, and creates no job; a later valid request with the same
// key creates one (the refusal stored nothing under it).
func TestEnqueueValidatedByTheClient(t *testing.T) {
	e := setup(t, openSQLite, nil)
	for _, c := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"kind": "a b"}, "kind"},
		{map[string]any{"kind": "k", "queue": "q\tq"}, "queue"},
		{map[string]any{"kind": "k", "partition_key": "p\x01"}, "partition_key"},
		{map[string]any{"kind": "k", "idempotency_key": strings.Repeat("k", 300)}, "idempotency_key"},
		{map[string]any{"kind": "k", "priority": int64(1) << 40}, "priority"},
		{map[string]any{"kind": "k", "max_attempts": 5000}, "max_attempts"},
		{map[string]any{"kind": "k", "timeout": "10000h"}, "timeout"},
		{map[string]any{"kind": "k", "metadata": []int{1}}, "metadata"},
	} {
		for _, hk := range []string{"", "refused-" + c.field} {
			r := e.req("POST", "/v1/jobs", e.admin, c.body, "Idempotency-Key", hk)
			expect(t, r, 400, "/problems/invalid-request")
			if d, _ := r.json(t)["detail"].(string); !strings.HasPrefix(d, c.field+": ") {
				t.Errorf("%v: detail %q, want it to name %s", c.body, d, c.field)
			}
		}
	}
	// Args that parse as JSON for encoding/json but break the job rule
	// (a number out of the double range, a lone surrogate).
	for _, args := range []string{`{"n":1e400}`, `{"s":"\ud800"}`} {
		r := e.req("POST", "/v1/jobs", e.admin, `{"kind":"k","args":`+args+`}`, "Idempotency-Key", "raw-args")
		expect(t, r, 400, "/problems/invalid-request")
		if d, _ := r.json(t)["detail"].(string); !strings.HasPrefix(d, "args: ") {
			t.Errorf("args %s: detail %q, want it to name args", args, d)
		}
	}
	if n := e.countJobs(); n != 0 {
		t.Fatalf("%d jobs after refusals, want 0", n)
	}
	r := e.req("POST", "/v1/jobs", e.admin, map[string]any{"kind": "k"}, "Idempotency-Key", "refused-kind")
	expect(t, r, 201, "")
}
