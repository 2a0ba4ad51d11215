package pgstore

import (
	"context"
	"strings"
	"testing"
)

// TestOpenErrorHidesPassword: a URL whose password holds an unescaped '@'
// (libpq and pgx end the user info at the first '@') is refused before
// connecting, saying how to write it, and no error from Open quotes any
// part of the password: pgx used to resolve the host "twoxyz@127.0.0.1"
// (the password's tail) and quote it in its connect error.
func TestOpenErrorHidesPassword(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url       string
		fragments []string // parts of the password that must not show
		want      string   // in the error
	}{
		{"postgres://postgres:hunter@twoxyz@127.0.0.1:5432/test", []string{"hunter", "twoxyz"}, "%40"},
		{"postgres://postgres:hunter@twoxyz:zzqv@127.0.0.1:5432/test", []string{"hunter", "twoxyz", "zzqv"}, "%40"},
		{"postgres://postgres:hunter%zztwoxyz@127.0.0.1:5432/test", []string{"hunter", "twoxyz"}, ""},
		{"postgres://postgres:hunter/twoxyz@127.0.0.1:5432/test", []string{"hunter", "twoxyz"}, ""},
		// A well-formed URL whose password is wrong or whose server is
		// down: the error never quotes the password either.
		{"postgres://postgres:hunterTwoxyz@127.0.0.1:1/test", []string{"hunterTwoxyz"}, ""},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		s, err := Open(ctx, tc.url, &Config{Schema: "never_created"})
		cancel()
		if err == nil {
			s.Close()
			t.Errorf("%s: opened", tc.url)
			continue
		}
		for _, f := range tc.fragments {
			if strings.Contains(err.Error(), f) {
				t.Errorf("%s: error quotes %q of the password: %v", tc.url, f, err)
			}
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %q does not say %q", tc.url, err, tc.want)
		}
	}
}
