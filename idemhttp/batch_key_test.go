package idemhttp_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/idem-dev/idem/idemhttp"
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

// TestBatchItemKeyFormat pins the keys BatchItemKey gives the items of a
// batch sent with an Idempotency-Key header, which are stored: "K:<i>" up
// to 255 bytes (counted in bytes), else "sha256:" + the hex SHA-256 of K +
// ":<i>".
func TestBatchItemKeyFormat(t *testing.T) {
	t.Parallel()
	k253, kE := strings.Repeat("k", 253), strings.Repeat("k", 251)+"é" // both 253 bytes
	for _, tc := range []struct {
		k    string
		i    int
		want string
	}{
		{"order-7", 0, "order-7:0"},
		{k253, 9, k253 + ":9"},
		{k253, 10, "sha256:7a416e92873abf32f21941bab095d75b701f05e04161037e39fd7d1ae02482e0:10"},
		{kE, 9, kE + ":9"},
		{kE, 10, "sha256:c427e7fd6113599a95c031e02e06a567673fb6a68f6dfb12b2a60c7ab7383136:10"},
	} {
		if got := idemhttp.BatchItemKey(tc.k, tc.i); got != tc.want {
			t.Errorf("BatchItemKey(%d bytes, %d) = %q, want %q", len(tc.k), tc.i, got, tc.want)
		}
	}
}
