// Package dbtest finds a PostgreSQL server for tests and gives each test a
// schema of its own.
//
// The server is IDEM_TEST_DATABASE_URL when set, otherwise the local server
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable when it answers,
// otherwise a throwaway cluster that this test process starts with initdb
// when PostgreSQL's binaries are installed (it dies with the process).
// Without any, tests skip with a loud message — or fail when
// IDEM_REQUIRE_POSTGRES=1 (CI sets it, so a skipped suite cannot pass).
package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// LocalURL is the local server tried when IDEM_TEST_DATABASE_URL is not set.
const LocalURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

var probe struct {
	once sync.Once
	url  string
	err  error
}

// PostgresURL returns the URL of the test server, or skips (fails under
// IDEM_REQUIRE_POSTGRES=1) when there is none.
func PostgresURL(t testing.TB) string {
	t.Helper()
	probe.once.Do(func() {
		probe.url = os.Getenv("IDEM_TEST_DATABASE_URL")
		if probe.url == "" {
			probe.url = LocalURL
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, probe.url)
		if err == nil {
			err = conn.Ping(ctx)
			conn.Close(ctx)
		}
		probe.err = err
		if err != nil && os.Getenv("IDEM_TEST_DATABASE_URL") == "" {
			if url, _, terr := startThrowaway(); terr == nil { // lives as long as the process
				probe.url, probe.err = url, nil
			} else {
				probe.err = errors.Join(err, fmt.Errorf("no throwaway cluster either: %w", terr))
			}
		}
	})
	if probe.err != nil {
		msg := "PostgreSQL not available: " + probe.err.Error() +
			" (set IDEM_TEST_DATABASE_URL or start a server on 127.0.0.1:5432)"
		if os.Getenv("IDEM_REQUIRE_POSTGRES") == "1" {
			t.Fatal(msg + "; IDEM_REQUIRE_POSTGRES=1 forbids skipping")
		}
		t.Skip("*** " + msg + " ***")
	}
	return probe.url
}

// NewSchema returns the server URL and a fresh schema name idem_test_<random>
// that does not exist yet (the store under test creates it); the schema is
// dropped with everything in it when the test ends.
func NewSchema(t testing.TB) (url string, schema string) {
	t.Helper()
	url = PostgresURL(t)
	schema = "idem_test_" + randomSuffix(t)
	execAtCleanup(t, url, `DROP SCHEMA IF EXISTS "`+schema+`" CASCADE`, "drop schema "+schema)
	return url, schema
}

// randomSuffix returns 12 random hex digits for a test's own name.
func randomSuffix(t testing.TB) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// execAtCleanup runs sql on a connection of its own to url when the test
// ends (what names it in the error, if it fails). It may take minutes on a
// loaded machine: DROP DATABASE waits for an immediate checkpoint, which
// took over 30 s under a parallel test run with other work beside it.
func execAtCleanup(t testing.TB, url, sql, what string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Errorf("%s: %v", what, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Errorf("%s: %v", what, err)
		}
	})
}

// NewDatabase creates a database of its own for a test (CREATE DATABASE
// with options, e.g. "TEMPLATE template0 LOCALE_PROVIDER icu …"; "" for the
// defaults) and returns its URL; it is dropped, with any sessions still on
// it, when the test ends. A test needs one where what other tests do in
// the shared database would change its outcome: VACUUM, say, cannot remove
// rows that a snapshot of another session in the same database may still
// see, while sessions in other databases do not hold it back.
func NewDatabase(t testing.TB, options string) string {
	t.Helper()
	base := PostgresURL(t)
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	name := "idem_test_db_" + randomSuffix(t)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name+" "+options); err != nil {
		t.Fatalf("create database: %v", err)
	}
	execAtCleanup(t, base, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)", "drop database "+name)
	cfg, err := pgx.ParseConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Replace(base, "/"+cfg.Database, "/"+name, 1)
}
