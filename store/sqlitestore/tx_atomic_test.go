package sqlitestore

import (
	"context"
	"errors"
	"testing"

	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/storetest"
)

// TestInsertTxAtomic: a JobInsertManyTx that fails part-way leaves none of
// its batch in the caller's transaction, which commits the caller's own
// writes (storetest.InsertTxAtomic; pgstore runs the same).
func TestInsertTxAtomic(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	createTable(t, s, "CREATE TABLE orders (id text PRIMARY KEY)")
	createTable(t, s, `CREATE TRIGGER refuse_kind BEFORE INSERT ON jobs WHEN NEW.kind = '`+storetest.FailKind+`'
		BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`)
	orders := 0
	storetest.InsertTxAtomic(t, s, func(ctx context.Context, p *store.JobInsertManyParams) (insertErr, commitErr error) {
		orders++
		commitErr = s.WriteTx(ctx, func(ctx context.Context, tx *Tx) error {
			if _, err := tx.ExecContext(ctx, "INSERT INTO orders VALUES (?)", orders); err != nil {
				return err
			}
			_, insertErr = s.JobInsertManyTx(ctx, tx, p)
			return nil // the caller ignores the error and commits
		})
		return insertErr, commitErr
	})
	if n := countRows(t, s, "orders"); n != orders {
		t.Errorf("%d orders, want the caller's %d: its own writes commit around a failed batch", n, orders)
	}
}

// TestFinishTxAtomic: a JobFinishManyTx that fails part-way leaves nothing
// of its finish in the caller's transaction, which commits the caller's
// own writes (storetest.FinishTxAtomic; pgstore runs the same).
func TestFinishTxAtomic(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	createTable(t, s, "CREATE TABLE orders (id integer PRIMARY KEY)")
	createTable(t, s, `CREATE TRIGGER refuse_release BEFORE UPDATE OF state ON jobs
		WHEN NEW.kind = '`+storetest.FinishFailKind+`' AND OLD.state = 'pending' AND NEW.state <> 'pending'
		BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`)
	orders := 0
	storetest.FinishTxAtomic(t, s, func(ctx context.Context, p []*store.JobFinishParams) (finishErr, commitErr error) {
		orders++
		commitErr = s.WriteTx(ctx, func(ctx context.Context, tx *Tx) error {
			if _, err := tx.ExecContext(ctx, "INSERT INTO orders VALUES (?)", orders); err != nil {
				return err
			}
			errs, err := s.JobFinishManyTx(ctx, tx, p)
			finishErr = errors.Join(err, errors.Join(errs...))
			return nil // the caller ignores the error and commits
		})
		return finishErr, commitErr
	})
	if n := countRows(t, s, "orders"); n != orders {
		t.Errorf("%d orders, want the caller's %d: its own writes commit around a failed finish", n, orders)
	}
}
