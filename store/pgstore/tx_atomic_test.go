package pgstore

import (
	"context"
	"errors"
	"testing"

	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/storetest"
)

// TestInsertTxAtomic: a JobInsertManyTx that fails part-way leaves none of
// its batch in the caller's transaction, even if the caller commits
// (storetest.InsertTxAtomic; sqlitestore runs the same). PostgreSQL aborts
// the transaction, so the commit itself is refused.
func TestInsertTxAtomic(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, 4)
	ctx := t.Context()
	q := `"` + s.Schema() + `"`
	for _, ddl := range []string{
		`CREATE FUNCTION ` + q + `.refuse_kind() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN RAISE EXCEPTION 'refused by the test'; END $$`,
		`CREATE TRIGGER refuse_kind BEFORE INSERT ON ` + q + `.jobs FOR EACH ROW
			WHEN (NEW.kind = '` + storetest.FailKind + `') EXECUTE FUNCTION ` + q + `.refuse_kind()`,
	} {
		if _, err := s.Pool().Exec(ctx, ddl); err != nil {
			t.Fatal(err)
		}
	}
	storetest.InsertTxAtomic(t, s, func(ctx context.Context, p *store.JobInsertManyParams) (insertErr, commitErr error) {
		tx, err := s.Pool().Begin(ctx)
		if err != nil {
			return nil, err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		_, insertErr = s.JobInsertManyTx(ctx, tx, p)
		return insertErr, tx.Commit(ctx) // the caller ignores the error and commits
	})
}

// TestFinishTxAtomic: a JobFinishManyTx that fails part-way leaves nothing
// of its finish in the caller's transaction (storetest.FinishTxAtomic;
// sqlitestore runs the same). PostgreSQL aborts the transaction, so the
// commit itself is refused.
func TestFinishTxAtomic(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, 4)
	ctx := t.Context()
	q := `"` + s.Schema() + `"`
	for _, ddl := range []string{
		`CREATE FUNCTION ` + q + `.refuse_release() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN RAISE EXCEPTION 'refused by the test'; END $$`,
		`CREATE TRIGGER refuse_release BEFORE UPDATE OF state ON ` + q + `.jobs FOR EACH ROW
			WHEN (NEW.kind = '` + storetest.FinishFailKind + `' AND OLD.state = 'pending' AND NEW.state <> 'pending')
			EXECUTE FUNCTION ` + q + `.refuse_release()`,
	} {
		if _, err := s.Pool().Exec(ctx, ddl); err != nil {
			t.Fatal(err)
		}
	}
	storetest.FinishTxAtomic(t, s, func(ctx context.Context, p []*store.JobFinishParams) (finishErr, commitErr error) {
		tx, err := s.Pool().Begin(ctx)
		if err != nil {
			return nil, err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		errs, err := s.JobFinishManyTx(ctx, tx, p)
		return errors.Join(err, errors.Join(errs...)), tx.Commit(ctx) // the caller ignores the error and commits
	})
}
