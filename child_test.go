package idem_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem/store/pgstore"
)

// The harness of the multi-process tests: the test binary is run again as a
// child process (TestMain sends it to its role by an environment variable),
// driven over its stdin and read on its stdout.

// startTestChild starts the test binary again with env added to this
// process's environment, its stderr shared with this process, and returns
// the command and its stdin and stdout pipes. Stopping the child is the
// caller's (each harness stops its children its own way).
func startTestChild(t *testing.T, env ...string) (*exec.Cmd, io.WriteCloser, io.ReadCloser) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child %v: %v", env, err)
	}
	return cmd, stdin, stdout
}

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
