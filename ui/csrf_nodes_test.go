package ui_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/idem-dev/idem/ui"
)

// TestCSRFTokenValidOnEveryNode: a form rendered by one node (or before a
// restart) is accepted by another dashboard process over the same API —
// nodes behind a load balancer without sticky sessions, as deploy/compose.yaml
// runs two — while a wrong token is still refused there.
func TestCSRFTokenValidOnEveryNode(t *testing.T) {
	t.Parallel()
	e := setup(t)
	h2, err := ui.New(e.api0, nil) // a second node (or the same one restarted)
	if err != nil {
		t.Fatal(err)
	}
	node2 := httptest.NewServer(h2)
	t.Cleanup(node2.Close)

	cookie := e.login(e.keyA) // signed in on the first node
	id := e.enqueue(e.keyA, "q", "k", map[string]any{})
	m := csrfRE.FindStringSubmatch(body(t, e.get("/ui/jobs/"+id, cookie)))
	if m == nil {
		t.Fatal("no CSRF token on the job page")
	}
	post := func(token string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("POST", node2.URL+"/ui/jobs/"+id+"/cancel",
			strings.NewReader(url.Values{"csrf": {token}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", node2.URL)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		req.AddCookie(cookie)
		res, err := (&http.Transport{}).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { res.Body.Close() })
		return res
	}
	if res := post(strings.Repeat("0", 64)); res.StatusCode != http.StatusForbidden {
		t.Fatalf("a wrong token on the second node: %d, want 403", res.StatusCode)
	}
	if res := post(m[1]); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("the first node's form posted to the second node: %d, want 303:\n%s", res.StatusCode, body(t, res))
	}
	j, err := e.api(e.keyA).GetJob(t.Context(), id)
	if err != nil || j.State != "cancelled" {
		t.Fatalf("job after the cancel on the second node: %+v %v", j, err)
	}
}
