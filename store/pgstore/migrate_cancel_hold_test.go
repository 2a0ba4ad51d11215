package pgstore

import (
	"testing"

	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store/storetest"
)

// TestMigrateCancelHold: a database at migration 0025 with a job of a
// FIFO partition cancelled while it ran (the old cancel released the
// partition at once; here its lease is even left set, as no path of 0025
// leaves it, to show the migration clears it) is migrated to 0026: the
// partition's next job is claimable at once — no process of the old
// binary will acknowledge that cancel — and a new cancel holds its
// partition. It also runs 0026's down migration.
func TestMigrateCancelHold(t *testing.T) {
	t.Parallel()
	dbtest.PostgresURL(t)
	s, _ := newOwnDatabaseStore(t, 2, true)
	ctx := t.Context()
	a, b := storetest.SeedCancelHoldUpgrade(t, s)
	// Down to 0025: the migrations from 0026 on (counted: versions may
	// skip numbers).
	if err := s.MigrateDown(ctx, stepsAbove(t, 25)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, s.sql(`UPDATE {schema}.jobs SET state = 'cancelled', finished_at = started_at,
    last_error = 'cancelled before the upgrade' WHERE id = $1`), a.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	storetest.CheckCancelHoldUpgrade(t, s, a, b)
}
