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

	"github.com/idem-dev/idem/ui"
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

// TestLoginRefusals: each bad sign-in answers the login page again with its
// own status and message, and sets no session cookie.
func TestLoginRefusals(t *testing.T) {
	t.Parallel()
	e := setup(t)
	cases := []struct {
		name   string
		form   url.Values
		hdr    http.Header
		status int
		want   string
	}{
		{"no key", url.Values{}, nil, http.StatusBadRequest, "Enter an API key"},
		{"blank key", url.Values{"key": {"   "}}, nil, http.StatusBadRequest, "Enter an API key"},
		{"key with a dot (the cookie separator)", url.Values{"key": {"idem_a.b"}}, nil, http.StatusBadRequest, "Enter an API key"},
		{"key with a semicolon", url.Values{"key": {"idem_a;b"}}, nil, http.StatusBadRequest, "Enter an API key"},
		{"key too long", url.Values{"key": {"idem_" + strings.Repeat("x", 512)}}, nil, http.StatusBadRequest, "Enter an API key"},
		{"unknown key", url.Values{"key": {"idem_unknown"}}, nil, http.StatusUnauthorized, "Unknown or revoked API key."},
		{"tenant key asks for another tenant", url.Values{"key": {e.keyA}, "tenant": {"b"}}, nil, http.StatusForbidden, "Tenant b: "},
		{"cross-site form", url.Values{"key": {e.keyA}}, http.Header{"Sec-Fetch-Site": {"cross-site"}}, http.StatusForbidden, "cross-site request refused"},
		{"foreign Origin", url.Values{"key": {e.keyA}}, http.Header{"Origin": {"http://evil.example"}}, http.StatusForbidden, "another origin"},
		{"unparsable Origin", url.Values{"key": {e.keyA}}, http.Header{"Origin": {"http://[::1"}}, http.StatusForbidden, "another origin"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := e.post("/ui/login", c.form, c.hdr, nil)
			b := body(t, res)
			if res.StatusCode != c.status || !strings.Contains(b, c.want) {
				t.Fatalf("%d, want %d with %q:\n%s", res.StatusCode, c.status, c.want, b)
			}
			for _, ck := range res.Cookies() {
				if ck.Name == "idem_session" && ck.MaxAge >= 0 {
					t.Fatalf("a refused sign-in set a session: %+v", ck)
				}
			}
		})
	}
	t.Run("the tenant typed is kept on the page", func(t *testing.T) {
		res := e.post("/ui/login", url.Values{"key": {e.keyA}, "tenant": {"b"}}, nil, nil)
		if b := body(t, res); !strings.Contains(b, `name="tenant" value="b"`) {
			t.Fatalf("tenant not kept:\n%s", b)
		}
	})
}

// TestLoginRedirectStaysInside: the next of a sign-in is followed only
// inside the dashboard; anything else goes to its home.
func TestLoginRedirectStaysInside(t *testing.T) {
	t.Parallel()
	e := setup(t)
	cases := []struct{ next, want string }{
		{"", ui.Prefix},
		{"/ui/jobs?state=dead", "/ui/jobs?state=dead"},
		{"/ui/dlq", "/ui/dlq"},
		{"https://evil.example/ui/", ui.Prefix},
		{"//evil.example/ui/", ui.Prefix},
		{"/ui/\\evil.example", ui.Prefix},
		{"/v1/jobs", ui.Prefix},
		{"ui/jobs", ui.Prefix},
	}
	for _, c := range cases {
		t.Run(c.next, func(t *testing.T) {
			res := e.post("/ui/login", url.Values{"key": {e.keyA}, "next": {c.next}}, nil, nil)
			if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != c.want {
				t.Fatalf("%d to %q, want 303 to %q", res.StatusCode, res.Header.Get("Location"), c.want)
			}
			page := body(t, e.get("/ui/login?next="+url.QueryEscape(c.next)))
			if !strings.Contains(page, `name="next" value="`+strings.ReplaceAll(c.want, "&", "&amp;")+`"`) {
				t.Fatalf("login page keeps another next than %q:\n%s", c.want, page)
			}
		})
	}
}

// sessionRole returns the role letter of a session cookie ("a" admin, "t"
// tenant) and the tenant cookie's value.
func sessionRole(t *testing.T, res *http.Response) (role, tenant string) {
	t.Helper()
	for _, c := range res.Cookies() {
		switch c.Name {
		case "idem_session":
			parts := strings.SplitN(c.Value, ".", 3)
			if len(parts) != 3 {
				t.Fatalf("session cookie %q", c.Value)
			}
			role = parts[1]
		case "idem_tenant":
			if c.MaxAge >= 0 {
				tenant = c.Value
			}
		}
	}
	return role, tenant
}

// TestLoginRoles: an admin key signs in as admin, optionally straight into
// another tenant; a tenant key as a tenant; logout ends the session.
func TestLoginRoles(t *testing.T) {
	t.Parallel()
	e := setup(t)
	cases := []struct {
		name, key, tenant    string
		wantRole, wantTenant string
	}{
		{"admin", e.admin, "", "a", ""},
		{"admin into tenant b", e.admin, "b", "a", "b"},
		{"tenant key", e.keyA, "", "t", ""},
		{"tenant key naming its own tenant", e.keyA, "a", "t", "a"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := e.post("/ui/login", url.Values{"key": {c.key}, "tenant": {c.tenant}}, nil, nil)
			if res.StatusCode != http.StatusSeeOther {
				t.Fatalf("login: %d %s", res.StatusCode, body(t, res))
			}
			if role, tenant := sessionRole(t, res); role != c.wantRole || tenant != c.wantTenant {
				t.Fatalf("role %q tenant %q, want %q %q", role, tenant, c.wantRole, c.wantTenant)
			}
		})
	}
	t.Run("logout clears both cookies", func(t *testing.T) {
		cookie := e.login(e.keyA)
		m := csrfRE.FindStringSubmatch(body(t, e.get("/ui/jobs", cookie)))
		if m == nil {
			t.Fatal("no CSRF token on the jobs page")
		}
		res := e.post("/ui/logout", url.Values{"csrf": {m[1]}}, nil, cookie)
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/ui/login" {
			t.Fatalf("logout: %d to %q", res.StatusCode, res.Header.Get("Location"))
		}
		cleared := map[string]bool{}
		for _, c := range res.Cookies() {
			if c.MaxAge < 0 && c.Value == "" {
				cleared[c.Name] = true
			}
		}
		if !cleared["idem_session"] || !cleared["idem_tenant"] {
			t.Fatalf("cookies not cleared: %v", res.Cookies())
		}
	})
	t.Run("logout without a session is refused", func(t *testing.T) {
		res := e.post("/ui/logout", url.Values{}, nil, nil)
		if b := body(t, res); res.StatusCode != http.StatusForbidden || !strings.Contains(b, "Sign in first") {
			t.Fatalf("%d:\n%s", res.StatusCode, b)
		}
	})
	t.Run("a forged session cookie is no session", func(t *testing.T) {
		for _, v := range []string{"x", "n.z.key", ".a.key", "n.a.", "n.a"} {
			res := e.get("/ui/jobs", &http.Cookie{Name: "idem_session", Value: v})
			if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/ui/login?next=") {
				t.Fatalf("cookie %q: %d %q", v, res.StatusCode, res.Header.Get("Location"))
			}
		}
	})
}

// TestMountServesBoth: Mount serves the dashboard under Prefix (with its
// security headers), redirects /ui, and hands every other path to the API.
func TestMountServesBoth(t *testing.T) {
	t.Parallel()
	e := setup(t)
	srv := httptest.NewServer(ui.Mount(e.api0, nil))
	t.Cleanup(srv.Close)
	cases := []struct {
		path     string
		status   int
		location string
		problem  bool // an API problem (application/problem+json)
	}{
		{"/v1/stats", http.StatusUnauthorized, "", true},
		{"/v1/nothing-here", http.StatusNotFound, "", true},
		{"/uix", http.StatusNotFound, "", true},
		{"/ui", http.StatusMovedPermanently, "/ui/", false},
		{"/ui/", http.StatusSeeOther, "/ui/login?next=%2Fui%2F", false},
		{"/ui/login", http.StatusOK, "", false},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			req, _ := http.NewRequest("GET", srv.URL+c.path, nil)
			res, err := (&http.Transport{}).RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			problem := res.Header.Get("Content-Type") == "application/problem+json"
			if res.StatusCode != c.status || res.Header.Get("Location") != c.location || problem != c.problem {
				t.Fatalf("%d %q %q, want %d %q problem=%v", res.StatusCode, res.Header.Get("Location"),
					res.Header.Get("Content-Type"), c.status, c.location, c.problem)
			}
			if strings.HasPrefix(c.path, "/ui/") && res.Header.Get("X-Frame-Options") != "DENY" {
				t.Fatalf("dashboard page without its security headers: %v", res.Header)
			}
		})
	}
}

// TestPagesWithARevokedKey: a session whose key the API no longer knows (a
// key revoked after sign-in) gets, on every page, the API's 401 as an error
// page titled by what failed (not as a filter to fix, on the lists); the
// overview's live fragment keeps polling (200) and shows the problem in
// place.
func TestPagesWithARevokedKey(t *testing.T) {
	t.Parallel()
	e := setup(t)
	gone := &http.Cookie{Name: "idem_session", Value: "nonce.t.idem_revoked0000000000"}
	cases := []struct{ path, title string }{
		{"/ui/", "Could not load the overview"},
		{"/ui/jobs", "Could not list jobs"},
		{"/ui/jobs/1", "Could not load job 1"},
		{"/ui/dlq", "Could not list the dead jobs"},
		{"/ui/dlq/requeue?queue=q", "Could not count the dead jobs"},
		{"/ui/limits", "Could not read the limits"},
		{"/ui/schedules", "Could not list the schedules"},
		{"/ui/cache?key=k", "Could not load the cache statistics"},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			res := e.get(c.path, gone)
			b := body(t, res)
			if res.StatusCode != http.StatusUnauthorized || !strings.Contains(b, c.title) || !strings.Contains(b, `class="msg error"`) ||
				strings.Contains(b, "Fix the filter") {
				t.Fatalf("%d, want 401 titled %q:\n%s", res.StatusCode, c.title, b)
			}
		})
	}
	t.Run("the live fragment", func(t *testing.T) {
		res := e.get("/ui/overview/queues", gone)
		b := body(t, res)
		if res.StatusCode != http.StatusOK || !strings.HasPrefix(b, `<p class="msg error" role="alert">Could not refresh: `) {
			t.Fatalf("%d:\n%s", res.StatusCode, b)
		}
	})
	t.Run("overview.json", func(t *testing.T) {
		if res := e.get("/ui/overview.json", gone); res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%d, want 401", res.StatusCode)
		}
	})
}
