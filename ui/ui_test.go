package ui_test

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("database/sql.(*DB).connectionOpener"))
}

// login signs in over plain HTTP and returns the session cookie.
func (e *env) login(key string) *http.Cookie {
	e.t.Helper()
	res := e.post("/ui/login", url.Values{"key": {key}}, nil, nil)
	if res.StatusCode != http.StatusSeeOther {
		e.t.Fatalf("login: %d", res.StatusCode)
	}
	for _, c := range res.Cookies() {
		if c.Name == "idem_session" {
			return c
		}
	}
	e.t.Fatal("no session cookie")
	return nil
}

func (e *env) post(path string, form url.Values, hdr http.Header, c *http.Cookie) *http.Response {
	e.t.Helper()
	req, _ := http.NewRequest("POST", e.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range hdr {
		req.Header[k] = v
	}
	if c != nil {
		req.AddCookie(c)
	}
	res, err := (&http.Transport{}).RoundTrip(req)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { res.Body.Close() })
	return res
}

func body(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

func TestSession(t *testing.T) {
	t.Parallel()
	e := setup(t)
	cookie := e.login(e.keyA)

	t.Run("cookie is HttpOnly and SameSite=Strict", func(t *testing.T) {
		if !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/ui/" {
			t.Fatalf("cookie %+v", cookie)
		}
	})
	t.Run("pages need a session", func(t *testing.T) {
		res := e.get("/ui/jobs")
		if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/ui/login?next=") {
			t.Fatalf("%d %s", res.StatusCode, res.Header.Get("Location"))
		}
	})
	t.Run("the API is still served beside the dashboard", func(t *testing.T) {
		res := e.get("/v1/stats")
		if res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("GET /v1/stats without key: %d", res.StatusCode)
		}
	})

	id := e.enqueue(e.keyA, "q", "k", map[string]any{})
	page := body(t, e.get("/ui/jobs/"+id, cookie))
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no CSRF token on the job page")
	}
	token := m[1]
	cases := []struct {
		name string
		form url.Values
		hdr  http.Header
		want string
	}{
		{"no token", url.Values{}, nil, "CSRF"},
		{"wrong token", url.Values{"csrf": {strings.Repeat("0", 64)}}, nil, "CSRF"},
		{"cross-site fetch", url.Values{"csrf": {token}}, http.Header{"Sec-Fetch-Site": {"cross-site"}}, "cross-site"},
		{"same-site other origin", url.Values{"csrf": {token}}, http.Header{"Sec-Fetch-Site": {"same-site"}}, "cross-site"},
		{"foreign Origin", url.Values{"csrf": {token}}, http.Header{"Origin": {"http://evil.example"}}, "another origin"},
	}
	for _, c := range cases {
		t.Run("POST refused: "+c.name, func(t *testing.T) {
			res := e.post("/ui/jobs/"+id+"/cancel", c.form, c.hdr, cookie)
			if b := body(t, res); res.StatusCode != http.StatusForbidden || !strings.Contains(b, c.want) {
				t.Fatalf("%d, want 403 with %q:\n%s", res.StatusCode, c.want, b)
			}
		})
	}
	t.Run("the job survived every forged cancel", func(t *testing.T) {
		j, err := e.api(e.keyA).GetJob(t.Context(), id)
		if err != nil || j.State != "available" {
			t.Fatalf("%+v %v", j, err)
		}
	})
	t.Run("POST with the token and same origin acts", func(t *testing.T) {
		res := e.post("/ui/jobs/"+id+"/cancel", url.Values{"csrf": {token}},
			http.Header{"Origin": {e.srv.URL}, "Sec-Fetch-Site": {"same-origin"}}, cookie)
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("%d %s", res.StatusCode, body(t, res))
		}
		j, err := e.api(e.keyA).GetJob(t.Context(), id)
		if err != nil || j.State != "cancelled" {
			t.Fatalf("%+v %v", j, err)
		}
	})
}

func TestSecureCookieOverTLS(t *testing.T) {
	t.Parallel()
	e := setup(t)
	tlsSrv := httptest.NewTLSServer(e.srv.Config.Handler)
	t.Cleanup(tlsSrv.Close)
	req, _ := http.NewRequest("POST", tlsSrv.URL+"/ui/login", strings.NewReader(url.Values{"key": {e.keyA}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // test server
	res, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	for _, c := range res.Cookies() {
		if c.Name == "idem_session" {
			if !c.Secure || !c.HttpOnly {
				t.Fatalf("cookie over TLS %+v", c)
			}
			return
		}
	}
	t.Fatalf("no session cookie: %d", res.StatusCode)
}

// TestBadInputNeverFails500 sends malformed filters and forms to every
// page: each answers a 4xx page with a specific message.
func TestBadInputNeverFails500(t *testing.T) {
	t.Parallel()
	e := setup(t)
	cookie := e.login(e.keyA)
	cases := []struct{ path, want string }{
		{"/ui/jobs?since=nope", "is not a time"},
		{"/ui/jobs?until=2026-13-01", "is not a time"},
		{"/ui/jobs?since=2026-11-26T05:00&until=2026-11-26T04:00", "must be later"},
		{"/ui/jobs?state=exploded", "is not a job state"},
		{"/ui/jobs?limit=-3", "Page size"},
		{"/ui/jobs?limit=99999", "Page size"},
		{"/ui/jobs?args=.=x", "empty part"},
		{"/ui/jobs?meta=novalue", "key=value"},
		{"/ui/jobs?cursor=garbage!", "cursor"},
		{"/ui/dlq?cursor=%00", "cursor"},
		{"/ui/dlq/requeue", "Choose a queue or a kind"},
		{"/ui/jobs/123456789", "does not exist"},
		{"/ui/jobs/-1x", "not a job id"},
		{"/ui/cache?key=", "Enter a key"},
		{"/ui/cache?key=" + strings.Repeat("k", 400), "Key"},
		{"/ui/schedule", "no dashboard page"},
	}
	for _, c := range cases {
		t.Run(c.path[:min(len(c.path), 60)], func(t *testing.T) {
			res := e.get(c.path, cookie)
			b := body(t, res)
			if res.StatusCode < 400 || res.StatusCode >= 500 {
				t.Fatalf("status %d, want 4xx:\n%s", res.StatusCode, b)
			}
			if !strings.Contains(b, c.want) || !strings.Contains(b, `class="msg error"`) {
				t.Fatalf("page lacks %q in an error message:\n%s", c.want, b)
			}
		})
	}
}
