package idem_test

import (
	"context"
	"fmt"
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

// exampleJobWait waits until job id is finished (completed, cancelled or
// dead) and returns it. It stands in for Client.JobWait, which a
// colleague is adding; replace it with that once it lands. Until then it
// polls JobGet, bounded to 10 s, because the runtime offers no completion
// signal a caller can wait on.
func exampleJobWait(ctx context.Context, c *idem.Client, id int64) *idem.JobRow {
	deadline := time.Now().Add(10 * time.Second)
	for {
		job, err := c.JobGet(ctx, "", id)
		if err != nil {
			panic(err)
		}
		if job.State == idem.StateCompleted || job.State == idem.StateCancelled || job.State == idem.StateDead {
			return job
		}
		if time.Now().After(deadline) {
			panic(fmt.Sprintf("job %d still %s after 10s", id, job.State))
		}
		time.Sleep(2 * time.Millisecond)
	}
}
