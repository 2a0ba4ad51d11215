package idem_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem/store/pgstore"
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
