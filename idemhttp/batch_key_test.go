package idemhttp_test

import (
	"fmt"
	"strings"
	"testing"
)

// TestBatchLongHeaderKey: a batch whose Idempotency-Key header is too long
// to add ":<index>" to (a 255-character key) still enqueues its items, and
// a retry of it creates nothing new; a key that fits keeps "K:<index>".
func TestBatchLongHeaderKey(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	long := strings.Repeat("k", 255)
	body := `{"jobs":[{"kind":"h"},{"kind":"h","args":{"n":2}},{"kind":"h","idempotency_key":"own"}]}`
	var first []string
	for try := range 2 {
		r := e.req("POST", "/v1/jobs/batch", e.keyA, body, "Idempotency-Key", long)
		expect(t, r, 200, "")
		var ids []string
		for i, it := range r.json(t)["results"].([]any) {
			item := it.(map[string]any)
			job, ok := item["job"].(map[string]any)
			if !ok {
				t.Fatalf("try %d item %d: %v", try, i, item)
			}
			if want := try == 1; item["existing"] != want {
				t.Fatalf("try %d item %d: existing %v, want %v", try, i, item["existing"], want)
			}
			key, _ := job["idempotency_key"].(string)
			if i < 2 && (len(key) > 255 || !strings.HasSuffix(key, fmt.Sprintf(":%d", i))) {
				t.Fatalf("item %d: key %q, want at most 255 characters ending :%d", i, key, i)
			}
			ids = append(ids, job["id"].(string))
		}
		if try == 0 {
			first = ids
		} else if strings.Join(ids, ",") != strings.Join(first, ",") {
			t.Fatalf("retry gave jobs %v, want %v", ids, first)
		}
	}
	if n := e.countJobs(); n != 3 {
		t.Fatalf("jobs %d, want 3", n)
	}

	// A key that fits keeps the derivation it always had.
	fits := strings.Repeat("f", 250)
	r := e.req("POST", "/v1/jobs/batch", e.keyA, `{"jobs":[{"kind":"h"}]}`, "Idempotency-Key", fits)
	expect(t, r, 200, "")
	job := r.json(t)["results"].([]any)[0].(map[string]any)["job"].(map[string]any)
	if job["idempotency_key"] != fits+":0" {
		t.Fatalf("key %v, want %q", job["idempotency_key"], fits+":0")
	}
}
