package cli

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestDeleteCommandsPrintJSON: `targets delete` and `topics unsubscribe`
// with --json print a JSON object (with "deleted", as `dlq delete` and
// `schedules delete` do), not their text line.
func TestDeleteCommandsPrintJSON(t *testing.T) {
	t.Parallel()
	url, key, _ := cliServer(t)
	api := []string{"--url", url, "--api-key", key, "--json"}
	for _, c := range []struct {
		setup, del []string
		want       map[string]any
	}{
		{[]string{"targets", "put", "orders", "--target-url", "http://127.0.0.1:9/hook", "--queue", "hooks"},
			[]string{"targets", "delete", "orders"}, map[string]any{"deleted": "orders"}},
		{[]string{"topics", "subscribe", "orders", "billing", "--target-url", "http://127.0.0.1:9/h"},
			[]string{"topics", "unsubscribe", "orders", "billing"},
			map[string]any{"deleted": true, "topic": "orders", "subscription": "billing"}},
	} {
		if out, errs, code := run(t, append(c.setup, api...)...); code != 0 || !json.Valid([]byte(out)) {
			t.Fatalf("%v: %d %q %q", c.setup, code, out, errs)
		}
		out, errs, code := run(t, append(c.del, api...)...)
		var got map[string]any
		if code != 0 || json.Unmarshal([]byte(out), &got) != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%v --json: exit %d, stdout %q (want %v), stderr %q", c.del, code, out, c.want, errs)
		}
	}
}

// TestJSONErrorOnFlagErrors: a flag error met before --json=true (or
// --json) is parsed is still reported as JSON on stderr when the command
// line asks for JSON; --json=false keeps the text.
func TestJSONErrorOnFlagErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		json bool
	}{
		{[]string{"jobs", "list", "--bogus", "--json"}, true},
		{[]string{"jobs", "list", "--bogus", "--json=true"}, true},
		{[]string{"jobs", "list", "--bogus", "--json=1"}, true},
		{[]string{"jobs", "list", "--bogus", "--json=false"}, false},
		{[]string{"jobs", "list", "--bogus", "--", "--json"}, false},
	} {
		_, errs, code := run(t, c.args...)
		if code != ExitUsage {
			t.Errorf("%v: exit %d, want %d", c.args, code, ExitUsage)
		}
		if got := json.Valid([]byte(errs)); got != c.json {
			t.Errorf("%v: stderr is JSON: %v, want %v: %q", c.args, got, c.json, errs)
		}
	}
}

// TestJSONOutputKeepsHTMLCharacters: --json prints the API's values as the
// API writes them, '<', '>' and '&' as they are: the CLI re-encoded them
// as \u003c, \u003e and \u0026 (encoding/json's HTML escaping), so the
// args printed differed byte for byte from those sent and answered.
func TestJSONOutputKeepsHTMLCharacters(t *testing.T) {
	t.Parallel()
	url, key, _ := cliServer(t)
	out, errs, code := run(t, "enqueue", "k", "--args", `{"h":"<b>&amp;</b>"}`, "--url", url, "--api-key", key, "--json")
	if code != 0 || !json.Valid([]byte(out)) {
		t.Fatalf("enqueue --json: exit %d, %q %q", code, out, errs)
	}
	if !strings.Contains(out, `"<b>&amp;</b>"`) {
		t.Errorf("enqueue --json printed the args escaped: %s", out)
	}
	_, errs, _ = run(t, "jobs", "get", "<&>", "--url", url, "--api-key", key, "--json")
	if !json.Valid([]byte(errs)) || strings.Contains(errs, `\u003c`) {
		t.Errorf("an error --json: %s", errs)
	}
}
