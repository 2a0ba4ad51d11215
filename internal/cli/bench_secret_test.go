package cli

import (
	"context"
	"strings"
	"testing"
)

// benchSecretURLs are PostgreSQL URLs whose password must not show in any
// error: malformed ones (an unescaped '@', a bad escape, a '/') that pgx
// splits elsewhere and used to quote in its parse or connect errors, and a
// well-formed one to a closed port.
var benchSecretURLs = []struct {
	url       string
	fragments []string
}{
	{"postgres://postgres:hunter@twoxyz@127.0.0.1:5432/test", []string{"hunter", "twoxyz"}},
	{"postgres://postgres:hunter@twoxyz:zzqv@127.0.0.1:5432/test", []string{"hunter", "twoxyz", "zzqv"}},
	{"postgres://postgres:hunter%zztwoxyz@127.0.0.1:5432/test", []string{"hunter", "twoxyz"}},
	{"postgres://postgres:hunter/twoxyz@127.0.0.1:5432/test", []string{"hunter", "twoxyz"}},
	{"postgres://postgres:hunterTwoxyz@127.0.0.1:1/test", []string{"hunterTwoxyz"}},
}

// TestBenchErrorsHidePassword: the bench commands connect to PostgreSQL
// on their own (the schema checks, the drop, the growth bench's settle and
// EXPLAIN) besides the store; they connected with pgx.Connect(url), whose
// errors quote the parts of a malformed URL's password. Like
// pgstore.Open, they refuse an unescaped '@' and never quote the password.
func TestBenchErrorsHidePassword(t *testing.T) {
	t.Parallel()
	for _, tc := range benchSecretURLs {
		leak := func(what, text string) {
			t.Helper()
			for _, f := range tc.fragments {
				if strings.Contains(text, f) {
					t.Errorf("%s with %s quotes %q of the password:\n%s", what, tc.url, f, text)
				}
			}
		}
		for _, args := range [][]string{
			{"bench", "--database", tc.url, "--schema", "bench_secret", "--jobs", "1"},
			{"bench-growth", "--database", tc.url, "--waiting", "1", "--enqueue", "1", "--singles", "1", "--claims", "1"},
			{"bench-node", "--database", tc.url, "--schema", "bench_secret", "--workers", "1"},
		} {
			out, errs, code := run(t, args...)
			if code == ExitOK {
				t.Errorf("%s with %s: exit 0", args[0], tc.url)
			}
			leak(args[0], out+errs)
		}
		ctx := context.Background()
		if _, err := schemaExists(ctx, tc.url, "bench_secret"); err == nil {
			t.Errorf("schemaExists %s: no error", tc.url)
		} else {
			leak("schemaExists", err.Error())
		}
		if err := dropSchema(ctx, tc.url, "bench_secret"); err == nil {
			t.Errorf("dropSchema %s: no error", tc.url)
		} else {
			leak("dropSchema", err.Error())
		}
	}
}
