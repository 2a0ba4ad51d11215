package ui_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/idem-dev/idem/ui"
)

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
