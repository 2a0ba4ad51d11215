package dbtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Querier is what UntilLocks asks: a *pgx.Conn or a *pgxpool.Pool.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// UntilLocks runs query, a boolean question on pg_locks, on db until it
// answers want (true), or until stop (when not nil) says to stop (false),
// within 30 s, failing the test with msg after that. PostgreSQL sends no
// event when a session starts or stops waiting for a lock (LISTEN/NOTIFY is
// delivered at commit, and the waiter has not committed), so pg_locks is
// polled (Until).
func UntilLocks(t testing.TB, db Querier, want bool, stop func() bool, msg, query string, args ...any) bool {
	t.Helper()
	return Until(t, db, want, stop, msg, query, args...)
}

// Until runs query, a boolean question on the server's own state
// (pg_locks, pg_stat_activity: sessions that wait, listen or connect, of
// which PostgreSQL sends no event), on db until it answers want (true), or
// until stop (when not nil) says to stop (false), within 30 s, failing the
// test with msg after that. The sleep is the poll's interval.
func Until(t testing.TB, db Querier, want bool, stop func() bool, msg, query string, args ...any) bool {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if stop != nil && stop() {
			return false
		}
		var got bool
		if err := db.QueryRow(t.Context(), query, args...).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got == want {
			return true
		}
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
		time.Sleep(5 * time.Millisecond) // the poll's interval (no event to wait on, above)
	}
}
