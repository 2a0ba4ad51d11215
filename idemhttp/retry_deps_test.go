package idemhttp_test

import (
	"strings"
	"testing"
)

// TestRetryDeletedDependency: a job cancelled because its dependency died
// never ran; once the dead dependency is deleted from the DLQ, retrying
// the job is a 400 problem naming the job and the dependency (not a 500,
// not a retry that would run it), and the job stays cancelled.
func TestRetryDeletedDependency(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	d := e.dead(e.keyA, "q")
	c := e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "q", "depends_on": []string{d}})
	if j := e.req("GET", "/v1/jobs/"+c, e.keyA, nil).json(t); j["state"] != "cancelled" {
		t.Fatalf("dependant of a dead job is %v, want cancelled", j["state"])
	}
	expect(t, e.req("DELETE", "/v1/dlq/"+d, e.keyA, nil), 204, "")

	r := e.req("POST", "/v1/jobs/"+c+"/retry", e.keyA, nil)
	expect(t, r, 400, "/problems/invalid-request")
	detail, _ := r.json(t)["detail"].(string)
	for _, want := range []string{"job " + c, "dependency " + d + " no longer exists", "enqueue the job again"} {
		if !strings.Contains(detail, want) {
			t.Errorf("problem detail %q does not say %q", detail, want)
		}
	}
	if j := e.req("GET", "/v1/jobs/"+c, e.keyA, nil).json(t); j["state"] != "cancelled" {
		t.Fatalf("refused job is %v, want cancelled", j["state"])
	}
}
