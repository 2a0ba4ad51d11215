package idemhttp_test

import (
	"testing"

	"github.com/idem-dev/idem/internal/dbtest"
)

// TestBatchItemRepeatedMemberFailsOnlyItself: an item of POST
// /v1/jobs/batch that repeats a member name (in args, or the item's own
// fields) fails only itself, with its 400 problem naming the member, as
// any other bad item does (API.md: "one bad item fails only itself"); the
// other items are enqueued. The whole batch was refused. The envelope's
// own members are still checked: "jobs" twice is a 400 for the batch.
// Both stores.
func TestBatchItemRepeatedMemberFailsOnlyItself(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		batchItemRepeatedMember(t, openSQLite)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		dbtest.PostgresURL(t)
		batchItemRepeatedMember(t, openPostgres)
	})
}

func batchItemRepeatedMember(t *testing.T, open opener) {
	e := setup(t, open, nil)
	body := `{"jobs":[` +
		`{"kind":"a","queue":"bi"},` +
		`{"kind":"b","queue":"bi","args":{"x":1,"x":2}},` +
		`{"kind":"c","queue":"bi","kind":"d"},` +
		`{"kind":"e","queue":"bi","args":{"s":"]}\"{[","kind":1,"l":[{"y":1},{"y":2}]}}` +
		`]}`
	r := e.req("POST", "/v1/jobs/batch", e.keyA, body)
	expect(t, r, 200, "")
	results, _ := r.json(t)["results"].([]any)
	if len(results) != 4 {
		t.Fatalf("%d results, want 4: %s", len(results), r.body)
	}
	for i, field := range map[int]string{1: "args.x", 2: "kind"} {
		item, _ := results[i].(map[string]any)
		p, _ := item["error"].(map[string]any)
		errs, _ := p["errors"].(map[string]any)
		if p == nil || p["status"] != float64(400) || errs[field] != "duplicate member name" || item["job"] != nil {
			t.Errorf("item %d: %v, want a 400 problem naming %s", i, item, field)
		}
	}
	for _, i := range []int{0, 3} {
		item, _ := results[i].(map[string]any)
		if item["job"] == nil || item["error"] != nil {
			t.Errorf("item %d: %v, want its job", i, item)
		}
	}
	if n := e.countJobs(); n != 2 {
		t.Fatalf("%d jobs written, want 2", n)
	}

	for name, c := range map[string]struct{ body, field string }{
		"jobs twice":           {`{"jobs":[{"kind":"a","args":{"s":"]},\"x"}}],"jobs":[{"kind":"b"}]}`, "jobs"},
		"jobs spelled in caps": {`{"jobs":[{"kind":"a"}],"JOBS":[]}`, "JOBS"},
	} {
		r := e.req("POST", "/v1/jobs/batch", e.keyA, c.body)
		expect(t, r, 400, "/problems/invalid-request")
		if errs, _ := r.json(t)["errors"].(map[string]any); errs[c.field] == nil {
			t.Errorf("%s: %s, want a problem naming %s", name, r.body, c.field)
		}
	}
	if n := e.countJobs(); n != 2 {
		t.Fatalf("refused batches wrote %d jobs", n-2)
	}
}
