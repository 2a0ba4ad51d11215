package retryspec

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp/wire"
	"github.com/idem-dev/idem/idemtype"
)

func spec(t *testing.T, s string) *wire.RetrySpec {
	t.Helper()
	var r wire.RetrySpec
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

// TestParse: what the retry object means, and the field a refusal names.
func TestParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in       string
		want     *idem.RetryPolicy
		attempts int
		field    string
	}{
		{`{"max_attempts":4}`, nil, 4, ""}, // no backoff field: no policy
		{`{"base":"30","max":"1h"}`, &idem.RetryPolicy{Base: 30 * time.Second, Max: time.Hour}, 0, ""},
		{`{"jitter":0}`, &idem.RetryPolicy{Jitter: -1}, 0, ""},
		{`{"delays":["1s","5s"],"max":"1s"}`, &idem.RetryPolicy{Max: time.Second, Delays: []time.Duration{time.Second, 5 * time.Second}}, 0, ""},
		{`{"base":"1h"}`, &idem.RetryPolicy{Base: time.Hour}, 0, ""},
		{`{"base":"2h"}`, nil, 0, "retry.max"},
		{`{"max":"1s"}`, nil, 0, "retry.max"},
		{`{"base":"1m","max":"1s"}`, nil, 0, "retry.max"},
		{`{"base":""}`, nil, 0, "retry.base"},
		{`{"base":"0"}`, nil, 0, "retry.base"},
		{`{"max_attempts":0}`, nil, 0, "retry.max_attempts"},
		{`{"factor":101}`, nil, 0, "retry.factor"},
		{`{"jitter":1.5}`, nil, 0, "retry.jitter"},
		{`{"delays":["1s"],"factor":2}`, nil, 0, "retry.delays"},
		{`{"delays":["1s","-1s"]}`, nil, 0, "retry.delays[1]"},
	} {
		pol, attempts, err := Parse(spec(t, tc.in))
		var inv *idemtype.InvalidError
		switch {
		case tc.field != "":
			if !errors.As(err, &inv) || inv.Field != tc.field || !errors.Is(err, idemtype.ErrInvalid) {
				t.Errorf("%s: %v, want an InvalidError on %s", tc.in, err, tc.field)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.in, err)
		case attempts != tc.attempts || (pol == nil) != (tc.want == nil) || pol != nil && fmtPolicy(*pol) != fmtPolicy(*tc.want):
			t.Errorf("%s: %+v, %d; want %+v, %d", tc.in, pol, attempts, tc.want, tc.attempts)
		}
	}
}

func fmtPolicy(p idem.RetryPolicy) string {
	b, _ := json.Marshal(p)
	return string(b)
}
