package idem_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

func invalidField(err error) string {
	var ie *idem.InvalidError
	if errors.As(err, &ie) && errors.Is(err, idem.ErrInvalid) {
		return ie.Field
	}
	if err != nil {
		return "not an InvalidError: " + err.Error()
	}
	return ""
}

func TestParseRate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in     string
		n      int
		period time.Duration
		ok     bool
	}{
		{"100/1m", 100, time.Minute, true},
		{"100/m", 100, time.Minute, true}, // a bare unit means one of it
		{"5/h", 5, time.Hour, true},
		{"1/1ms", 1, time.Millisecond, true},
		{"3/1.5s", 3, 1500 * time.Millisecond, true},
		{"3/.5s", 3, 500 * time.Millisecond, true}, // not 1.5s: a bare unit is a letter
		{"10/24h", 10, 24 * time.Hour, true},
		{"100", 0, 0, false},
		{"100/", 0, 0, false},
		{"0/1m", 0, 0, false},
		{"-5/1m", 0, 0, false},
		{"x/1m", 0, 0, false},
		{" 5/1m", 0, 0, false},
		{"5/500us", 0, 0, false},
		{"5/0s", 0, 0, false},
		{"5/-1m", 0, 0, false},
		{"5/1m/2", 0, 0, false},
		{"5/minute", 0, 0, false},
	} {
		n, p, err := idem.ParseRate(tc.in)
		if tc.ok != (err == nil) || n != tc.n || p != tc.period {
			t.Errorf("ParseRate(%q) = %d, %v, %v; want %d, %v, ok=%v", tc.in, n, p, err, tc.n, tc.period, tc.ok)
		}
		if err != nil && invalidField(err) != "rate" {
			t.Errorf("ParseRate(%q): %v does not name rate", tc.in, err)
		}
	}
}

// TestParseRateSaysWhatIsWrong: a refused rate's error says what is wrong
// with it; "5/1.5" (no unit) said the period must be at least 1ms.
func TestParseRateSaysWhatIsWrong(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"5/1.5":    "has no unit",
		"5/10":     "has no unit",
		"5/minute": `"minute" is not a duration`,
		"5/1x":     `"1x" is not a duration`,
		"5/500us":  "500µs is below 1ms",
		"5/0s":     "0s is below 1ms",
		"5/-1m":    "-1m0s is below 1ms",
		"5/soon":   `"soon" is not a duration`,
		"5/1m/2":   `"1m/2" is not a duration`,
		"0/1m":     "N must be a positive integer",
	} {
		_, _, err := idem.ParseRate(in)
		var inv *idem.InvalidError
		if !errors.As(err, &inv) || inv.Field != "rate" || !strings.Contains(inv.Reason, want) {
			t.Errorf("ParseRate(%q): %v, want an invalid rate saying %q", in, err, want)
		}
	}
}

func TestFormatRateRoundTrips(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n      int
		period time.Duration
		want   string
	}{
		{0, time.Minute, ""},
		{100, time.Minute, "100/1m"},
		{5, time.Hour, "5/1h"},
		{5, 90 * time.Minute, "5/90m"},
		{7, 48 * time.Hour, "7/48h"},
		{3, 1500 * time.Millisecond, "3/1.5s"},
		{2, 10 * time.Second, "2/10s"},
		{1, time.Millisecond, "1/1ms"},
	} {
		got := idem.FormatRate(tc.n, tc.period)
		if got != tc.want {
			t.Errorf("FormatRate(%d, %v) = %q, want %q", tc.n, tc.period, got, tc.want)
		}
		if got == "" {
			continue
		}
		n, p, err := idem.ParseRate(got)
		if err != nil || n != tc.n || p != tc.period {
			t.Errorf("ParseRate(FormatRate(%d, %v)) = %d, %v, %v", tc.n, tc.period, n, p, err)
		}
	}
}

func TestValidateJSON(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("[", idem.MaxJSONDepth) + strings.Repeat("]", idem.MaxJSONDepth)
	tooDeep := "[" + deep + "]"
	for _, tc := range []struct {
		name string
		in   string
		ok   bool
	}{
		{"object", `{"a":[1,2,{"b":null}]}`, true},
		{"scalar", `42`, true},
		{"the deepest allowed", deep, true},
		{"one level too deep", tooDeep, false},
		{"broken", `{"a":`, false},
		{"two values", `{} {}`, false},
		{"empty", ``, false},
		{"too large", `"` + strings.Repeat("a", idem.MaxArgsBytes) + `"`, false},
	} {
		err := idem.ValidateJSON("args", []byte(tc.in))
		if tc.ok != (err == nil) {
			t.Errorf("%s: %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && invalidField(err) != "args" {
			t.Errorf("%s: %v does not name args", tc.name, err)
		}
	}
}

func TestValidateText(t *testing.T) {
	t.Parallel()
	const max = 40
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"connection refused\n  at charge.go:42", true},
		{"café ☕", true},
		{"", true},
		{strings.Repeat("x", max), true},
		{strings.Repeat("x", max+1), false},
		{strings.Repeat("é", max/2) + "x", false}, // bytes, not runes, are counted
		{"bad \xff byte", false},
		{"nul \x00 byte", false},
	} {
		err := idem.ValidateText("error", tc.in, max)
		if tc.ok != (err == nil) {
			t.Errorf("%q: %v, want ok=%v", tc.in, err, tc.ok)
		}
		if err != nil && invalidField(err) != "error" {
			t.Errorf("%q: %v does not name the field", tc.in, err)
		}
	}
}

func TestValidatePriority(t *testing.T) {
	t.Parallel()
	for _, p := range []int{0, -1, 1, idem.MinPriority, idem.MaxPriority} {
		if err := idem.ValidatePriority(p); err != nil {
			t.Errorf("priority %d: %v", p, err)
		}
	}
	if math.MaxInt > math.MaxInt32 {
		for _, p := range []int{idem.MaxPriority + 1, idem.MinPriority - 1} {
			if invalidField(idem.ValidatePriority(p)) != "priority" {
				t.Errorf("priority %d accepted", p)
			}
		}
	}
}

func TestValidateFilter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		f     idem.JobFilter
		field string
	}{
		{"empty", idem.JobFilter{}, ""},
		{"every field", idem.JobFilter{Queue: "mail", Kind: "send", PartitionKey: "acct-1", IdempotencyKey: "k 1",
			States: []idem.JobState{idem.StateDead, idem.StateCancelled}}, ""},
		{"queue with a newline", idem.JobFilter{Queue: "mail\n"}, "queue"},
		{"kind not ASCII", idem.JobFilter{Kind: "envoi-é"}, "kind"},
		{"partition key too long", idem.JobFilter{PartitionKey: strings.Repeat("p", 256)}, "partition_key"},
		{"key with a control byte", idem.JobFilter{IdempotencyKey: "a\x01"}, "idempotency_key"},
		{"unknown state", idem.JobFilter{States: []idem.JobState{"finished"}}, "state"},
	} {
		if got := invalidField(idem.ValidateFilter(&tc.f)); got != tc.field {
			t.Errorf("%s: field %q, want %q", tc.name, got, tc.field)
		}
	}
}
