package idemhttp_test

import (
	"net/url"
	"testing"
)

// TestLimitScopesAndVisibility: each scope a limit path can name is refused
// with its field when malformed; a tenant key sees its own tenant's limits
// only (another tenant's is not found, not forbidden), an admin key every
// limit; a tenant key resumes and pauses only its own work.
func TestLimitScopesAndVisibility(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	for _, put := range []string{"/v1/limits/tenant/a", "/v1/limits/tenant/b", "/v1/limits/tenant/a?queue=mail"} {
		expect(t, e.req("PUT", put, e.admin, map[string]any{"concurrency": 2}), 200, "")
	}
	bad := url.PathEscape("bad name")
	cases := []struct {
		name, method, path, key string
		body                    any
		status                  int
		typ, field              string
	}{
		{"unknown scope", "GET", "/v1/limits/region/eu", "admin", nil, 400, "/problems/invalid-request", "scope"},
		{"unknown scope on put", "PUT", "/v1/limits/region/eu", "admin", map[string]any{"concurrency": 1}, 400, "/problems/invalid-request", "scope"},
		{"tenant name with a space", "GET", "/v1/limits/tenant/" + bad, "admin", nil, 400, "/problems/invalid-request", "name"},
		{"queue name with a space", "DELETE", "/v1/limits/queue/" + bad, "admin", nil, 400, "/problems/invalid-request", "name"},
		{"queue filter with a space", "GET", "/v1/limits/tenant/a?queue=" + url.QueryEscape("bad name"), "admin", nil, 400,
			"/problems/invalid-request", "queue"},
		{"another tenant's limit", "GET", "/v1/limits/tenant/b", "a", nil, 404, "/problems/not-found", ""},
		{"no limit on the scope", "GET", "/v1/limits/queue/none", "admin", nil, 404, "/problems/not-found", ""},
		{"resume with a bad queue", "POST", "/v1/queues/" + bad + "/resume", "admin", nil, 400, "/problems/invalid-request", "queue"},
		{"resume with a bad tenant", "POST", "/v1/queues/mail/resume", "admin", map[string]any{"tenant": "bad name"}, 400,
			"/problems/invalid-request", "tenant"},
		{"resume of another tenant's work", "POST", "/v1/queues/mail/resume", "a", map[string]any{"tenant": "b"}, 403, "/problems/forbidden", ""},
	}
	keys := map[string]string{"admin": e.admin, "a": e.keyA}
	var pcs []problemCase
	for _, c := range cases {
		pcs = append(pcs, problemCase{name: c.name, method: c.method, path: c.path, key: keys[c.key], body: c.body,
			status: c.status, typ: c.typ, field: c.field})
	}
	e.checkProblems(t, pcs)
	t.Run("each key lists what it may see", func(t *testing.T) {
		for key, want := range map[string]int{"admin": 3, "a": 2} {
			r := e.req("GET", "/v1/limits", keys[key], nil)
			expect(t, r, 200, "")
			ls := r.json(t)["limits"].([]any)
			if len(ls) != want {
				t.Fatalf("%s key lists %d limits, want %d: %s", key, len(ls), want, r.body)
			}
			for _, l := range ls {
				if key == "a" && l.(map[string]any)["tenant"] != "a" {
					t.Fatalf("tenant key a sees %v", l)
				}
			}
		}
	})
	t.Run("a tenant key sees its own limit in one queue", func(t *testing.T) {
		r := e.req("GET", "/v1/limits/tenant/a?queue=mail", e.keyA, nil)
		expect(t, r, 200, "")
		if m := r.json(t); m["tenant"] != "a" || m["queue"] != "mail" || m["concurrency"] != float64(2) {
			t.Fatalf("limit: %s", r.body)
		}
	})
	t.Run("a tenant key's resume is of its own work", func(t *testing.T) {
		expect(t, e.req("POST", "/v1/queues/mail/pause", e.keyA, nil), 200, "")
		r := e.req("POST", "/v1/queues/mail/resume", e.keyA, nil)
		expect(t, r, 200, "")
		if m := r.json(t); m["queue"] != "mail" || m["tenant"] != "a" || m["paused"] != false {
			t.Fatalf("resume: %s", r.body)
		}
	})
}
