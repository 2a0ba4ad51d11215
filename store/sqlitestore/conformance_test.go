package sqlitestore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store { return openTest(t, nil) })
}

var _ storetest.Raw = (*Store)(nil)

// RawSetFinal implements storetest.Raw: the job's own row only, through the
// writer.
func (s *Store) RawSetFinal(ctx context.Context, id int64, state idemtype.JobState, at time.Time) error {
	return s.write(ctx, 1, func(t *wtx) error {
		res, err := t.exec(`UPDATE jobs SET state = ?1, finished_at = ?2, lease_expires_at = NULL WHERE id = ?3`,
			string(state), toUS(at), id)
		if err != nil {
			return fmt.Errorf("set job %d %s: %w", id, state, err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return fmt.Errorf("set job %d %s: %d rows, %w", id, state, n, err)
		}
		return nil
	})
}
