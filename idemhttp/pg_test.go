package idemhttp_test

import (
	"context"
	"testing"

	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/pgstore"
)

func openPostgres(t *testing.T) store.Store {
	t.Helper()
	url, schema := dbtest.NewSchema(t)
	st, err := pgstore.Open(context.Background(), url, &pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// openPostgresCallerClock is openPostgres with the caller's clock deciding
// lease ends (pgstore.Config.CallerClock), for tests that move time.
func openPostgresCallerClock(t *testing.T) store.Store {
	t.Helper()
	url, schema := dbtest.NewSchema(t)
	st, err := pgstore.Open(context.Background(), url, &pgstore.Config{Schema: schema, CallerClock: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestAPIPostgres(t *testing.T) {
	t.Parallel()
	dbtest.PostgresURL(t) // skips loudly without a server
	runAPISuite(t, openPostgres)
}
