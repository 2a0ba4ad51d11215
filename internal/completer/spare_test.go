package completer_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/completer"
	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/pgstore"
)

// enteringStore is the real store, telling the test the size of each
// JobFinishMany call as it starts.
type enteringStore struct {
	store.Store
	entered chan int
}

func (s *enteringStore) JobFinishMany(ctx context.Context, p []*store.JobFinishParams) ([]error, error) {
	select {
	case s.entered <- len(p):
	default: // only the first call is awaited
	}
	return s.Store.JobFinishMany(ctx, p)
}

// TestFinishBehindALockedRow: on PostgreSQL, a finish whose job row another
// transaction holds locked waits in its batch; the finishes submitted after
// it are written meanwhile by the spare loop (after SpareAfter), not when
// the lock goes. Once the lock goes the first is written too. (Both small
// batches take pgstore's finish group, whose two workers are the default.)
func TestFinishBehindALockedRow(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url, schema := dbtest.NewSchema(t)
	st, err := pgstore.Open(ctx, url, &pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fins := claimed(t, st, 3)
	lock, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close(context.WithoutCancel(ctx))
	tx, err := lock.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "SELECT 1 FROM "+pgx.Identifier{schema, "jobs"}.Sanitize()+" WHERE id = $1 FOR UPDATE", fins[0].ID); err != nil {
		t.Fatal(err)
	}

	calls := &enteringStore{Store: st, entered: make(chan int, 10)}
	c := completer.New(calls, nil)
	_ = c.Start(ctx)
	stuck := make(chan struct{})
	c.SubmitThen(fins[0], nil, func() { close(stuck) })
	if n := <-calls.entered; n != 1 {
		t.Fatalf("first batch of %d", n)
	}
	// The first batch has taken the locked finish (it waits on the lock);
	// the next two queue behind it and must be written while it waits.
	// Their batch can start only after SpareAfter: the deadline is far
	// beyond it, and without the spare they would wait for the lock,
	// which goes only after them.
	written := make(chan struct{}, 2)
	for _, f := range fins[1:] {
		c.SubmitThen(f, nil, func() { written <- struct{}{} })
	}
	deadline := time.After(30 * time.Second)
	for range 2 {
		select {
		case <-written:
		case <-stuck:
			t.Fatal("the locked finish returned while its row was locked")
		case <-deadline:
			t.Fatal("finishes behind a locked row were not written")
		}
	}
	for _, f := range fins[1:] {
		if row, err := st.JobGet(ctx, &store.JobGetParams{Tenant: "t", ID: f.ID}); err != nil || row.State != idemtype.StateCompleted {
			t.Fatalf("job %d behind the lock: %v %v", f.ID, row, err)
		}
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	<-stuck
	c.Stop()
	if row, err := st.JobGet(ctx, &store.JobGetParams{Tenant: "t", ID: fins[0].ID}); err != nil || row.State != idemtype.StateCompleted {
		t.Fatalf("the locked job: %v %v", row, err)
	}
}
