package ui_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestDLQResolveForm: a dead job's page has a "Resolve" form with a note
// (POST /v1/dlq/{id}/resolve through the dashboard), guarded like the
// other forms: no CSRF token or another origin is refused and resolves
// nothing; with both, the job stays dead, resolved with the note, which
// its page then shows (and no form). A job that is not dead has no form,
// and resolving it says why it was not done.
func TestDLQResolveForm(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.login(e.keyA)
	id := e.dead(e.keyA, "billing")
	page := body(t, e.get("/ui/jobs/"+id, a))
	if !strings.Contains(page, `action="/ui/jobs/`+id+`/resolve"`) || !strings.Contains(page, `name="note"`) {
		t.Fatalf("no resolve form with a note on the dead job's page:\n%s", page)
	}
	token := e.csrf("/ui/jobs/"+id, a)
	resolved := func() string {
		t.Helper()
		j, err := e.api(e.keyA).GetJob(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if j.State != "dead" {
			t.Fatalf("job %s is %s, want dead", id, j.State)
		}
		if j.ResolvedAt == nil {
			return ""
		}
		return "resolved: " + j.ResolutionNote
	}
	for name, c := range map[string]struct {
		form url.Values
		hdr  http.Header
	}{
		"no token":     {url.Values{"note": {"forged"}}, e.sameOrigin()},
		"other origin": {url.Values{"csrf": {token}, "note": {"forged"}}, http.Header{"Origin": {"http://evil.example"}}},
		"cross-site":   {url.Values{"csrf": {token}, "note": {"forged"}}, http.Header{"Sec-Fetch-Site": {"cross-site"}}},
	} {
		if res := e.post("/ui/jobs/"+id+"/resolve", c.form, c.hdr, a); res.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", name, res.StatusCode)
		}
	}
	if got := resolved(); got != "" {
		t.Fatalf("a refused POST resolved the job (%s)", got)
	}
	page = e.submit(t, "/ui/jobs/"+id+"/resolve", url.Values{"csrf": {token}, "note": {"refunded by hand"}}, a)
	if !strings.Contains(page, "Job "+id+" resolved.") {
		t.Fatalf("no confirmation after resolve:\n%s", page)
	}
	if got := resolved(); got != "resolved: refunded by hand" {
		t.Fatalf("after resolve: %q", got)
	}
	if !strings.Contains(page, "refunded by hand") || strings.Contains(page, `action="/ui/jobs/`+id+`/resolve"`) {
		t.Errorf("the resolved job's page should show the note and no resolve form:\n%s", page)
	}
	live := e.enqueue(e.keyA, "q", "k", map[string]any{})
	if page := body(t, e.get("/ui/jobs/"+live, a)); strings.Contains(page, "/resolve") {
		t.Errorf("an available job has a resolve form:\n%s", page)
	}
	if page := e.submit(t, "/ui/jobs/"+live+"/resolve", url.Values{"csrf": {token}}, a); !strings.Contains(page, "Not done: ") {
		t.Errorf("resolving an available job:\n%s", page)
	}
}
