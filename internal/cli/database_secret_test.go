package cli

import (
	"strings"
	"testing"
)

// TestDatabaseMistakeHidesPassword: a database setting that is not a
// postgres:// URL is read as a SQLite path, so a misspelt scheme
// (pgsql://, postgre://) or a keyword/value connection string
// ("host=… password=…") was quoted whole, password included, in the
// errors of every command that opens the database, in the hints, and
// by --print-config. It is refused naming no more than its scheme, and
// printed masked.
func TestDatabaseMistakeHidesPassword(t *testing.T) {
	t.Parallel()
	for _, db := range []string{
		"pgsql://idem:s3cretpw@127.0.0.1:5432/idem",
		"postgre://idem:s3cretpw@127.0.0.1/idem",
		"host=127.0.0.1 user=idem password=s3cretpw dbname=idem",
		"user=idem password='s3cretpw' host=127.0.0.1",
	} {
		for _, args := range [][]string{
			{"apikey", "list", "--database", db},
			{"apikey", "list", "--database", db, "--json"},
			{"migrate", "--database", db},
			{"serve", "--database", db, "--print-config"},
			{"serve", "--database", db, "--print-config", "--json"},
		} {
			out, errs, code := run(t, args...)
			if strings.Contains(out+errs, "s3cretpw") {
				t.Errorf("%q (exit %d) shows the password:\n%s%s", args, code, out, errs)
			}
			if args[0] != "serve" && code == 0 {
				t.Errorf("%q: exit 0 for a database that is not one", args)
			}
		}
	}
}
