package idemhttp_test

import (
	"testing"
)

// TestQueryParametersStrict: a query parameter given empty (a filter
// for no value, not "any"), a comma list with an empty item (state=dead,)
// or a one-value parameter given twice (url.Values.Get kept the first and
// dropped the other) is a 400 naming the parameter, on every route that
// takes it; a repeated state or type (documented lists) is still taken.
func TestQueryParametersStrict(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	var cases []problemCase
	add := func(path, field string) {
		cases = append(cases, problemCase{name: path, method: "GET", path: path,
			status: 400, typ: "/problems/invalid-request", field: field})
	}
	for _, list := range []string{"/v1/jobs", "/v1/dlq"} {
		for _, state := range []string{"dead,", ",dead", "dead,,dead", "dead,%20", "dead&state="} {
			add(list+"?state="+state, "state")
		}
		for _, p := range []string{"queue", "kind", "partition_key", "idempotency_key", "error_code"} {
			add(list+"?"+p+"=", p)
			add(list+"?"+p+"=a&"+p+"=b", p)
		}
		add(list+"?limit=1&limit=2", "limit")
		add(list+"?cursor=ajE&cursor=ajI", "cursor") // j1, j2: both well formed
		add(list+"?since=2026-01-01T00:00:00Z&since=2026-01-02T00:00:00Z", "since")
		add(list+"?until=2026-01-01T00:00:00Z&until=2026-01-02T00:00:00Z", "until")
		add(list+"?resolved=true&resolved=false", "resolved")
	}
	add("/v1/jobs?finished_since=2026-01-01T00:00:00Z&finished_since=2026-01-02T00:00:00Z", "finished_since")
	add("/v1/topics/t/events?type=", "type")
	add("/v1/topics/t/events?type=a&type=", "type")
	add("/v1/topics/t/events?partition_key=", "partition_key")
	add("/v1/topics/t/events?partition_key=a&partition_key=b", "partition_key")
	add("/v1/topics/t/events?limit=1&limit=2", "limit")
	add("/v1/topics/t/events?cursor=1&cursor=2", "cursor")
	add("/v1/stats?all_tenants=yes", "all_tenants")
	add("/v1/stats?all_tenants=", "all_tenants")
	add("/v1/stats?all_tenants=false&all_tenants=true", "all_tenants")
	add("/v1/idempotency/k?include=result&include=result", "include")
	add("/v1/idempotency/k?include=", "include")
	add("/v1/limits/tenant/a?queue=q&queue=r", "queue")
	e.checkProblems(t, cases)

	for _, ok := range []string{
		"/v1/jobs?state=dead&state=completed", "/v1/jobs?state=dead,completed", "/v1/dlq?state=dead&queue=q",
		"/v1/topics/t/events?type=a&type=b", "/v1/stats?all_tenants=false", "/v1/jobs?cursor=",
	} {
		expect(t, e.req("GET", ok, e.keyA, nil), 200, "")
	}
}

// TestQueryEdgeForms: an empty query (?, ?&) is none; a name without = is
// that parameter given empty (a 400 for a filter); names are
// case-sensitive (?Queue= is unknown), as docs/limits.md says.
func TestQueryEdgeForms(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	for _, ok := range []string{"/v1/jobs?", "/v1/jobs?&", "/v1/jobs?&&", "/v1/stats?"} {
		expect(t, e.req("GET", ok, e.keyA, nil), 200, "")
	}
	e.checkProblems(t, []problemCase{
		{name: "no =", method: "GET", path: "/v1/jobs?queue", status: 400, typ: "/problems/invalid-request", field: "queue"},
		{name: "case", method: "GET", path: "/v1/jobs?Queue=q", status: 400, typ: "/problems/invalid-request", field: "Queue"},
		{name: "case in limits", method: "GET", path: "/v1/limits/tenant/a?QUEUE=q", status: 400, typ: "/problems/invalid-request", field: "QUEUE"},
	})
}
