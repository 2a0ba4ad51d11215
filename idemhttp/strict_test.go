package idemhttp_test

import (
	"strings"
	"testing"
)

// TestDuplicateMemberNames: a request body that repeats a member name in
// any object (the body itself, a nested request object such as retry or
// filter, args or metadata) is a 400 naming the member by its path, and
// nothing is written; the same name in different objects is not a
// duplicate. (An item of POST /v1/jobs/batch that repeats one fails only
// itself: TestBatchItemRepeatedMemberFailsOnlyItself.)
func TestDuplicateMemberNames(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	const detail = ": duplicate member name"
	var pcs []problemCase
	for _, c := range []struct{ name, path, body, field string }{
		{"top level", "/v1/jobs", `{"kind":"a","kind":"b"}`, "kind"},
		{"top level, other value types", "/v1/jobs", `{"kind":"a","priority":1,"queue":"q","priority":2}`, "priority"},
		{"spelled with an escape", "/v1/jobs", `{"kind":"a","\u006bind":"b"}`, "kind"},
		{"objects repeated", "/v1/jobs", `{"kind":"a","args":{},"args":{}}`, "args"},
		{"retry", "/v1/jobs", `{"kind":"a","retry":{"base":"1s","max":"9s","base":"2s"}}`, "retry.base"},
		{"metadata", "/v1/jobs", `{"kind":"a","metadata":{"m":"1","m":"2"}}`, "metadata.m"},
		{"args nested", "/v1/jobs", `{"kind":"a","args":{"x":[1,{"y":1,"y":2}]}}`, "args.x[1].y"},
		{"batch envelope", "/v1/jobs/batch", `{"jobs":[{"kind":"a"}],"jobs":[{"kind":"a"}]}`, "jobs"},
		{"replay filter", "/v1/jobs/replay", `{"filter":{"queue":"a","kind":"k","queue":"b"}}`, "filter.queue"},
		{"claim", "/v1/claim", `{"queues":["q"],"worker_id":"w","queues":["r"]}`, "queues"},
	} {
		pcs = append(pcs, problemCase{name: c.name, method: "POST", path: c.path, body: c.body,
			status: 400, typ: "/problems/invalid-request", detail: c.field + detail, field: c.field})
	}
	e.checkProblems(t, pcs)
	if n := e.countJobs(); n != 0 {
		t.Fatalf("refused bodies wrote %d jobs", n)
	}
	t.Run("many members", func(t *testing.T) {
		// Past the size where members are compared one by one.
		var b strings.Builder
		b.WriteString(`{"kind":"a","args":{`)
		for i := range 100 {
			b.WriteString(`"m` + strings.Repeat("x", i) + `":1,`)
		}
		b.WriteString(`"m":2}}`)
		r := e.req("POST", "/v1/jobs", e.keyA, b.String())
		expect(t, r, 400, "/problems/invalid-request")
		if d := r.json(t)["detail"]; d != "args.m"+detail {
			t.Fatalf("detail %q", d)
		}
	})
	t.Run("the same name in different objects", func(t *testing.T) {
		r := e.req("POST", "/v1/jobs", e.keyA,
			`{"kind":"a","args":{"kind":1,"x":{"kind":2},"l":[{"kind":3},{"kind":4}]},"metadata":{"kind":"m"},"retry":{"max_attempts":2}}`)
		expect(t, r, 201, "")
	})
}

// TestEnqueueUnknownDependency: depends_on naming a job that does not
// exist, or another tenant's job, is bad input (API.md: 400) naming
// depends_on, on a single enqueue, a batch item and a batch's job, and
// nothing is written.
func TestEnqueueUnknownDependency(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	other := e.enqueue(e.keyB, map[string]any{"kind": "k"})
	for _, dep := range []string{"999999", other} {
		r := e.req("POST", "/v1/jobs", e.keyA, map[string]any{"kind": "k", "depends_on": []string{dep}})
		expect(t, r, 400, "/problems/invalid-request")
		if errs, _ := r.json(t)["errors"].(map[string]any); errs["depends_on"] == nil || len(errs) != 1 {
			t.Fatalf("depends_on %s: problem does not name depends_on: %s", dep, r.body)
		}
		r = e.req("POST", "/v1/jobs/batch", e.keyA, map[string]any{"jobs": []map[string]any{{"kind": "k", "depends_on": []string{dep}}}})
		expect(t, r, 200, "")
		item := r.json(t)["results"].([]any)[0].(map[string]any)
		if p, _ := item["error"].(map[string]any); p == nil || p["status"] != float64(400) || p["type"] != "/problems/invalid-request" {
			t.Fatalf("batch item with depends_on %s: %s", dep, r.body)
		}
		r = e.req("POST", "/v1/batches", e.keyA, map[string]any{"key": "b-" + dep, "jobs": []map[string]any{{"kind": "k", "depends_on": []string{dep}}}})
		expect(t, r, 400, "/problems/invalid-request")
	}
	if n := e.countJobs(); n != 1 {
		t.Fatalf("%d jobs, want only tenant b's", n)
	}
}

// TestEnqueueEmptyMetadataSameRequest: metadata {} (however spaced) and
// absent both mean "no metadata", so a repeat of the key that spells it
// the other way is the same request (200 existing), while other metadata
// is still a different request (422). (null, which the document does not
// offer, is read as absent before the fingerprint.)
func TestEnqueueEmptyMetadataSameRequest(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	for i, first := range []string{`,"metadata":{}`, ``} {
		key := `"idempotency_key":"meta-` + string(rune('a'+i)) + `"`
		r := e.req("POST", "/v1/jobs", e.keyA, `{"kind":"k",`+key+first+`}`)
		expect(t, r, 201, "")
		id := r.job(t)["id"]
		for _, again := range []string{``, `,"metadata":{}`, `,"metadata": { } `} {
			r := e.req("POST", "/v1/jobs", e.keyA, `{"kind":"k",`+key+again+`}`)
			expect(t, r, 200, "")
			if got := r.job(t)["id"]; got != id || r.json(t)["existing"] != true {
				t.Fatalf("first %q, again %q: job %v existing %v, want job %v", first, again, got, r.json(t)["existing"], id)
			}
		}
		expect(t, e.req("POST", "/v1/jobs", e.keyA, `{"kind":"k",`+key+`,"metadata":{"a":"1"}}`), 422, "/problems/idempotency-key-reused")
	}
}
