package pgstore

import (
	"context"
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
