package pgstore

import (
	"context"
	"testing"
)

// TestIsRefused: PostgreSQL's own errors over data it cannot hold (a NUL
// byte in text, invalid JSON, bytes that are not UTF-8) are refusals, so
// the completer splits a batch over them instead of retrying it; a caller's
// deadline and a syntax error are not.
func TestIsRefused(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, 2)
	ctx := context.Background()
	for _, c := range []struct {
		name, q string
		arg     any
		want    bool
	}{
		{"NUL in text", "SELECT $1::text", "a\x00b", true},
		{"not UTF-8 in text", "SELECT $1::text", "caf\xe9", true},
		{"invalid JSON", "SELECT $1::text::json", `{"a":`, true},
		{"syntax error", "SELEC $1::text", "a", false},
	} {
		_, err := s.pool.Exec(ctx, c.q, c.arg)
		if err == nil {
			t.Fatalf("%s: no error", c.name)
		}
		if got := s.IsRefused(err); got != c.want {
			t.Errorf("%s: IsRefused(%v) = %v, want %v", c.name, err, got, c.want)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.pool.Exec(cctx, "SELECT 1"); err == nil || s.IsRefused(err) {
		t.Errorf("cancelled context: IsRefused(%v) is true", err)
	}
}
