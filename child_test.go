package idem_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/pgstore"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// The stores of the multi-process tests' children and of their parent test
// (the children start with dbtest.StartChild; TestMain sends each to its
// role).

// childPG opens, in a child process, the PostgreSQL store of schema (which
// the parent has migrated) on a pool of its own. On failure it says why on
// stderr and returns nils; otherwise the caller closes the store, then the
// pool.
func childPG(ctx context.Context, url, schema string) (*pgxpool.Pool, *pgstore.Store) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pool:", err)
		return nil, nil
	}
	st, err := pgstore.New(ctx, pool, &pgstore.Config{Schema: schema, SkipMigrate: true})
	if err != nil {
		pool.Close()
		fmt.Fprintln(os.Stderr, "store:", err)
		return nil, nil
	}
	return pool, st
}

// parentPG opens, in the test, the PostgreSQL store of schema on a pool of
// its own, migrating the schema; both close when the test ends.
func parentPG(t *testing.T, url, schema string) *pgstore.Store {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st, err := pgstore.New(context.Background(), pool, &pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// childStore opens the store of a child test process: the SQLite file
// named by the environment variable sqliteEnv, else the PostgreSQL schema
// of IDEM_MP_URL and IDEM_MP_SCHEMA. closeStore closes it; ok is false
// (with a message on stderr) when it cannot be opened.
func childStore(ctx context.Context, sqliteEnv string) (st store.Store, closeStore func(), ok bool) {
	if path := os.Getenv(sqliteEnv); path != "" {
		s, err := sqlitestore.Open(ctx, path, nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, "store:", err)
			return nil, nil, false
		}
		return s, func() { s.Close() }, true
	}
	pool, s := childPG(ctx, os.Getenv("IDEM_MP_URL"), os.Getenv("IDEM_MP_SCHEMA"))
	if s == nil {
		return nil, nil, false
	}
	return s, func() {
		s.Close()
		pool.Close()
	}, true
}
