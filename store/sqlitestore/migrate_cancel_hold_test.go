package sqlitestore

import (
	"context"
	"testing"

	"github.com/idem-dev/idem/store/storetest"
)

// TestMigrateCancelHold: a file at migration 0025 with a job of a FIFO
// partition cancelled while it ran (released at once by the old cancel;
// here its lease end is even left set, to show the migration clears it) is
// migrated to 0026: the partition's next job is claimable at once — no
// process of the old binary will acknowledge that cancel — and a new
// cancel holds its partition.
func TestMigrateCancelHold(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	ctx := context.Background()
	a, b := storetest.SeedCancelHoldUpgrade(t, s)
	err := s.write(ctx, 1, func(w *wtx) error {
		for _, q := range []string{
			`DROP INDEX IF EXISTS jobs_cancel_hold`, // 0029 merged it into jobs_running
			`DROP INDEX jobs_partition_head`,
			`CREATE INDEX jobs_partition_head ON jobs (queue, partition_key, tenant, id)
    WHERE partition_key <> '' AND state IN ('pending', 'scheduled', 'available', 'running', 'retryable')`,
			`DELETE FROM schema_migrations WHERE version = 26`,
			`UPDATE jobs SET state = 'cancelled', finished_at = started_at WHERE id = ?1`,
		} {
			if _, err := w.exec(q, a.ID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	storetest.CheckCancelHoldUpgrade(t, s, a, b)
}
