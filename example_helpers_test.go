package idem_test

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// exampleStore opens a SQLite store in a fresh temporary directory; close
// removes both.
func exampleStore(ctx context.Context) (st *sqlitestore.Store, closeFn func()) {
	dir, err := os.MkdirTemp("", "idem-example-")
	if err != nil {
		panic(err)
	}
	st, err = sqlitestore.Open(ctx, filepath.Join(dir, "idem.db"), nil)
	if err != nil {
		panic(err)
	}
	return st, func() { st.Close(); os.RemoveAll(dir) }
}

// exampleJobWait waits with Client.JobWait, bounded to 10 s, and panics on
// error (examples have no *testing.T).
func exampleJobWait(ctx context.Context, c *idem.Client, id int64) *idem.JobRow {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	job, err := c.JobWait(ctx, id)
	if err != nil {
		panic(err)
	}
	return job
}
