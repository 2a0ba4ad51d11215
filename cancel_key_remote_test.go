package idem_test

import "testing"

// TestRemoteCancelBeforeKeyAcquireLeavesKeyFree: as
// TestCancelBeforeKeyAcquireLeavesKeyFree, with the cancel made by another
// process (a client on its own store handle). On SQLite no announcement
// reaches the worker (nor here on PostgreSQL: the worker's store wrapper is
// no Listener), so only the store tells it: the claim's leases are
// checked after its key step, and a job cancelled before that step does
// not start and gives its key back. Before the fix the worker ran the
// cancelled job's handler, and the key lease its key step took after the
// cancel was held by nobody until it ended (10 minutes here): the key's
// next job snoozed behind it.
func TestRemoteCancelBeforeKeyAcquireLeavesKeyFree(t *testing.T) {
	t.Parallel()
	checkCancelBeforeKeyAcquire(t, "remote-cancel-before-acquire", true)
}
