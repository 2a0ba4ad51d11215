package pgstore

import (
	"context"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/dbtest"
)

// newTestStore opens a Store on a fresh schema, closed when the test ends.
// It uses CallerClock: the conformance suite drives time with a fake clock
// (clock_test.go covers the database clock).
func newTestStore(t testing.TB, maxConns int) *Store {
	t.Helper()
	return newTestStoreCfg(t, maxConns, &Config{CallerClock: true})
}

// newTestStoreCfg is newTestStore with a Config (its Schema is set here).
func newTestStoreCfg(t testing.TB, maxConns int, cfg *Config) *Store {
	t.Helper()
	url, schema := dbtest.NewSchema(t)
	c := *cfg
	c.Schema = schema
	s, err := Open(context.Background(), withPoolSize(url, maxConns), &c)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// newOwnDatabaseStore is newTestStore in a database of the test's own
// (dbtest.NewDatabase), for tests that migrate a schema with rows down and
// up again: each CREATE INDEX CONCURRENTLY of such a run waits for every
// transaction of its database older than its snapshot, which in the shared
// database are the other tests' (TestMigrateRecordNamespaces took 44 s of
// CI there, under 2 s alone).
func newOwnDatabaseStore(t testing.TB, maxConns int, migrate bool) (s *Store, url string) {
	t.Helper()
	url = dbtest.NewDatabase(t, "")
	s, err := Open(context.Background(), withPoolSize(url, maxConns),
		&Config{CallerClock: true, Schema: "idem_own_db", SkipMigrate: !migrate})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, url
}

// withPoolSize adds pool_max_conns to a URL.
func withPoolSize(url string, n int) string {
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + "pool_max_conns=" + itoa(n)
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
