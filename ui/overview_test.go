package ui_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// cell returns the count the overview shows for queue and state ("" when
// the row is missing).
func cell(page, queue, state string) string {
	row := regexp.MustCompile(`(?s)<tr data-queue="` + regexp.QuoteMeta(queue) + `">.*?</tr>`).FindString(page)
	if row == "" {
		return ""
	}
	m := regexp.MustCompile(`<td data-state="` + state + `">(?:<a [^>]*>)?(\d+)`).FindStringSubmatch(row)
	if m == nil {
		return ""
	}
	return m[1]
}

func TestOverviewCounts(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.enqueue(e.keyA, "mail", "send", map[string]any{"n": 1})
	e.enqueue(e.keyA, "mail", "send", map[string]any{"n": 2})
	cancelled := e.enqueue(e.keyA, "mail", "send", map[string]any{"n": 3})
	if _, err := e.api(e.keyA).CancelJob(t.Context(), cancelled); err != nil {
		t.Fatal(err)
	}
	e.kill(e.keyA, "billing", "charge")
	e.enqueue(e.keyB, "mail", "send", map[string]any{"n": 9}) // another tenant's
	a := e.login(e.keyA)

	for _, path := range []string{"/ui/", "/ui/overview/queues"} {
		res := e.get(path, a)
		page := body(t, res)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", path, res.StatusCode)
		}
		for _, tc := range []struct{ queue, state, want string }{
			{"mail", "available", "2"},
			{"mail", "cancelled", "1"},
			{"mail", "dead", "0"},
			{"billing", "dead", "1"},
			{"billing", "available", "0"},
		} {
			if got := cell(page, tc.queue, tc.state); got != tc.want {
				t.Errorf("%s: %s/%s = %q, want %s", path, tc.queue, tc.state, got, tc.want)
			}
		}
		// A non-zero count links to the jobs it counts.
		if !strings.Contains(page, `href="/ui/jobs?queue=mail&amp;state=available"`) {
			t.Errorf("%s: no link to the available mail jobs", path)
		}
	}
	// The overview page carries the chart; the server-wide health checks
	// are for admin keys, a tenant key is told so.
	page := body(t, e.get("/ui/", a))
	if !strings.Contains(page, `data-src="/ui/overview.json"`) || strings.Contains(page, `<th scope="row">dead_jobs</th>`) ||
		!strings.Contains(page, "sign in with an admin key") {
		t.Errorf("tenant key's overview:\n%s", page)
	}
	page = body(t, e.get("/ui/", e.login(e.admin)))
	if !strings.Contains(page, `<th scope="row">dead_jobs</th>`) || !strings.Contains(page, "Server status:") {
		t.Errorf("admin's overview lacks the health checks:\n%s", page)
	}
	// Tenant b's page counts its own job only.
	if got := cell(body(t, e.get("/ui/overview/queues", e.login(e.keyB))), "mail", "available"); got != "1" {
		t.Errorf("tenant b sees %q available mail jobs, want 1", got)
	}
}
