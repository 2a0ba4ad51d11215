package ui

import (
	"encoding/json"
	"testing"
)

func TestValueMatch(t *testing.T) {
	t.Parallel()
	args := json.RawMessage(`{"customer":"acme","n":42,"ok":true,"order":{"id":"o-1","lines":[1,2]},"none":null}`)
	cases := []struct {
		expr string
		want bool
	}{
		{"customer=acme", true},
		{"customer=globex", false},
		{"customer= acme ", true},
		{"n=42", true},
		{"n=42.0", false},
		{"ok=true", true},
		{"order.id=o-1", true},
		{"order.lines=[1,2]", false},
		{"order.missing=x", false},
		{"customer.id=acme", false},
		{"none=null", true},
		{"missing=", false},
	}
	for _, c := range cases {
		t.Run(c.expr, func(t *testing.T) {
			m, err := parseValueMatch(c.expr)
			if err != nil {
				t.Fatal(err)
			}
			if got := m.match(args); got != c.want {
				t.Fatalf("match = %v, want %v", got, c.want)
			}
		})
	}
}

func TestParseValueMatchErrors(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"noequals", "=x", "a..b=x", ".a=x"} {
		if _, err := parseValueMatch(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if m, err := parseValueMatch("  "); m != nil || err != nil {
		t.Errorf("blank: %v %v", m, err)
	}
}

func FuzzParseJobQuery(f *testing.F) {
	f.Add("2026-11-26T04:00", "customer=acme", "50", "dead")
	f.Add("x", "=", "-1", "??")
	f.Fuzz(func(t *testing.T, since, args, limit, state string) {
		q := map[string][]string{"since": {since}, "args": {args}, "limit": {limit}, "state": {state}}
		jq, errs := parseJobQuery(q)
		if len(errs) == 0 && (jq.Limit < 1 || jq.Limit > maxPageSize) {
			t.Fatalf("accepted limit %d", jq.Limit)
		}
	})
}
