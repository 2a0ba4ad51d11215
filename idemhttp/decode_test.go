package idemhttp

import (
	"testing"
)

// TestExplicitZero: a field set to 0 is seen however its key is spelled;
// an absent field, another value or the name as a value is not.
func TestExplicitZero(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body string
		want bool
	}{
		{`{"kind":"a"}`, false},
		{`{"kind":"a","max_attempts":0}`, true},
		{`{"kind":"a","max_attempts":0.0}`, true},
		{`{"kind":"a","max_attempts":-0}`, true},
		{`{"kind":"a","max_attempts":3}`, false},
		{`{"kind":"a","max_attempts":null}`, false},
		{`{"kind":"max_attempts"}`, false},
		{`{"kind":"a","max\u005fattempts":0}`, true},
		{`{"kind":"a\"","max_attempts":0}`, true},
		{`{"kind":"a\n"}`, false},
		{`{"kind":"a","max_attempts":0`, false}, // not JSON: the decoder reports it
	} {
		if got := explicitZero([]byte(tc.body), "max_attempts"); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.body, got, tc.want)
		}
	}
}

// FuzzExplicitZero: the shortcut never changes the answer.
func FuzzExplicitZero(f *testing.F) {
	for _, s := range []string{`{"max_attempts":0}`, `{"max\u005fattempts":0}`, `{"limit":0,"x":"\\"}`, `{"kind":"k"}`, `[0]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, field := range []string{"max_attempts", "limit"} {
			if got, want := explicitZero(body, field), decodedZero(body, field); got != want {
				t.Fatalf("%q %s: %v, want %v", body, field, got, want)
			}
		}
	})
}
