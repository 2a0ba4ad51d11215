package cli

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/idem-dev/idem/idemclient"
)

// TestCellAndLines: the human output keeps no control character (each
// shows as a visible escape), no invalid UTF-8 and no half character
// where it cuts; a table cell is one line, a detail value keeps its lines.
func TestCellAndLines(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in string
		max      int
		want     string
	}{
		{"plain", "boom", 60, "boom"},
		{"newlines and tabs are spaces", "a\nb\r\nc\td", 60, "a b c d"},
		{"CSI", "\x1b[2Jcleared", 60, `\x1b[2Jcleared`},
		{"OSC 52 clipboard", "\x1b]52;c;ZXZpbA==\x07x", 60, `\x1b]52;c;ZXZpbA==\x07x`},
		{"C1 CSI and DEL", "a\u009b2Jb\x7f", 60, `a\u009b2Jb\x7f`},
		{"bidi override", "abc\u202edcba", 60, `abc\u202edcba`},
		{"invalid UTF-8", "a\xff\xfeb", 60, "a\uFFFD\uFFFDb"},
		{"cut by characters", "ab€€€€", 4, "ab€…"},
		{"fits exactly", "ab€€", 4, "ab€€"},
		{"no limit", strings.Repeat("€", 100), 0, strings.Repeat("€", 100)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := cell(tc.in, tc.max); got != tc.want {
				t.Errorf("cell(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
			}
		})
	}
	got := lines("panic: x\n\tat f.go:1\x1b[1A\r\n\x1b]8;;http://evil\x07link")
	want := []string{"panic: x", "    at f.go:1\\x1b[1A", "\\x1b]8;;http://evil\\x07link"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("lines = %q, want %q", got, want)
	}
}

// TestHumanOutputIsSafe: a job whose error, args and metadata carry
// terminal escape sequences (a screen clear, an OSC 52 clipboard write, a
// C1 CSI, a bidi override) and a multi-byte character where the tables
// cut: `jobs list`, `dlq list`, `jobs attempts` and `jobs get` print no
// such character and valid UTF-8, and --json keeps the exact text. (The
// server takes kinds, queues and keys in printable ASCII only; the CLI
// cleans them all the same, as TestCellAndLines shows.)
func TestHumanOutputIsSafe(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	const esc = "\x1b[2J\x1b[H\x1b]52;c;ZXZpbA==\x07"
	// A 3-byte € from byte 58 on lies across byte 59, where the byte cut
	// of `jobs list` (60 columns) used to fall.
	failure := esc + strings.Repeat("x", 58-len(esc)) + strings.Repeat("€", 30) + "\u009b2J\u202e end"
	metadata := "{\"note\":\"\u009b31m\u202ered\"}"
	args := `{"s":"\u001b]0;title\u0007"}`
	id := e.enqueue("k", "--queue", "pull", "--max-attempts", "1", "--metadata", metadata, "--args", args)

	cl, err := (&apiFlags{url: e.url, apiKey: e.key}).client()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	jobs, err := cl.Claim(ctx, claimOne("pull"))
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %v %v", jobs, err)
	}
	if _, err := cl.Fail(ctx, id, jobs[0].LeaseToken, &idemclient.FailRequest{Error: failure, NoRetry: true}); err != nil {
		t.Fatal(err)
	}

	for _, args := range [][]string{{"jobs", "list"}, {"dlq", "list"}, {"jobs", "attempts", id}, {"jobs", "get", id}} {
		out := e.ok(id, args...)
		if strings.ContainsAny(out, "\x1b\x07\u009b\u202e") || !utf8.ValidString(out) {
			t.Errorf("idem %s prints raw control characters or invalid UTF-8:\n%q", strings.Join(args, " "), out)
		}
		if !strings.Contains(out, `\x1b[2J`) {
			t.Errorf("idem %s does not show the escape visibly:\n%q", strings.Join(args, " "), out)
		}
	}

	var got idemclient.Job
	e.jsonOut(&got, "jobs", "get", id)
	if got.LastError != failure || !sameJSON(got.Metadata, metadata) || !sameJSON(got.Args, args) {
		t.Errorf("jobs get --json: error %q metadata %s args %s, want %q %s %s", got.LastError, got.Metadata, got.Args, failure, metadata, args)
	}
	var page idemclient.JobPage
	e.jsonOut(&page, "dlq", "list")
	if len(page.Jobs) != 1 || page.Jobs[0].LastError != failure {
		t.Errorf("dlq list --json: %+v", page.Jobs)
	}
	var atts struct{ Attempts []idemclient.Attempt }
	e.jsonOut(&atts, "jobs", "attempts", id)
	if len(atts.Attempts) != 1 || atts.Attempts[0].Error != failure {
		t.Errorf("jobs attempts --json: %+v", atts.Attempts)
	}
}

// sameJSON reports whether got holds the JSON value of want.
func sameJSON(got []byte, want string) bool {
	var g, w any
	return json.Unmarshal(got, &g) == nil && json.Unmarshal([]byte(want), &w) == nil && reflect.DeepEqual(g, w)
}
