package ui_test

import (
	"net/http"
	"net/url"
	"testing"
)

// sameOrigin are the headers a browser sends with a form of the dashboard.
func (e *env) sameOrigin() http.Header {
	return http.Header{"Origin": {e.srv.URL}, "Sec-Fetch-Site": {"same-origin"}}
}

// csrf reads the CSRF token of a page the session sees.
func (e *env) csrf(path string, c *http.Cookie) string {
	e.t.Helper()
	m := csrfRE.FindStringSubmatch(body(e.t, e.get(path, c)))
	if m == nil {
		e.t.Fatalf("no CSRF token on %s", path)
	}
	return m[1]
}

// submit posts a dashboard form and returns the page it redirects to,
// with the one-time message the redirect left.
func (e *env) submit(t *testing.T, path string, form url.Values, c *http.Cookie) string {
	t.Helper()
	res := e.post(path, form, e.sameOrigin(), c)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("POST %s: %d, want 303:\n%s", path, res.StatusCode, body(t, res))
	}
	cookies := []*http.Cookie{c}
	for _, ck := range res.Cookies() {
		if ck.Name == "idem_flash" {
			cookies = append(cookies, ck)
		}
	}
	return body(t, e.get(res.Header.Get("Location"), cookies...))
}
