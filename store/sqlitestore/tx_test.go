package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// countRows counts the rows of table through a WriteTx (which also sees
// what is committed).
func countRows(t *testing.T, s *Store, table string) int {
	t.Helper()
	var n int
	err := s.WriteTx(context.Background(), func(ctx context.Context, tx *Tx) error {
		row, err := tx.QueryRowContext(ctx, "SELECT count(*) FROM "+table)
		if err != nil {
			return err
		}
		return row.Scan(&n)
	})
	if err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

func createTable(t *testing.T, s *Store, ddl string) {
	t.Helper()
	if err := s.WriteTx(context.Background(), func(ctx context.Context, tx *Tx) error {
		_, err := tx.ExecContext(ctx, ddl)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// TestWriteTxCommitsOrRollsBackTogether: the caller's rows and the jobs
// inserted through the Tx commit together, or neither exists.
func TestWriteTxCommitsOrRollsBackTogether(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	ctx := context.Background()
	createTable(t, s, "CREATE TABLE orders (id text PRIMARY KEY)")
	boom := errors.New("boom")
	var rolledBack int64
	err := s.WriteTx(ctx, func(ctx context.Context, tx *Tx) error {
		if _, err := tx.ExecContext(ctx, "INSERT INTO orders VALUES ('a')"); err != nil {
			return err
		}
		res, err := s.JobInsertManyTx(ctx, tx, &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{job("k")}, Now: t0})
		if err != nil {
			return err
		}
		rolledBack = res[0].Job.ID
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("WriteTx: %v, want the function's error", err)
	}
	if n := countRows(t, s, "orders"); n != 0 {
		t.Fatalf("orders after rollback: %d", n)
	}
	if _, err := s.JobGet(ctx, &store.JobGetParams{Tenant: "default", ID: rolledBack}); !errors.Is(err, idemtype.ErrNotFound) {
		t.Fatalf("rolled-back job: %v", err)
	}

	var committed int64
	err = s.WriteTx(ctx, func(ctx context.Context, tx *Tx) error {
		if _, err := tx.ExecContext(ctx, "INSERT INTO orders VALUES ('b')"); err != nil {
			return err
		}
		res, err := s.JobInsertManyTx(ctx, tx, &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{keyedJob("k", "order-b", "fp")}, Now: t0})
		if err != nil {
			return err
		}
		committed = res[0].Job.ID
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, s, "orders"); n != 1 {
		t.Fatalf("orders after commit: %d", n)
	}
	if j := getJob(t, s, committed); j.IdempotencyKey != "order-b" {
		t.Fatalf("committed job: %+v", j)
	}
}

// TestWriteTxFinishIsFenced: a completion through a Tx with a stale lease
// token fails with ErrLeaseLost and the caller's write beside it rolls back
// when the function returns that error.
func TestWriteTxFinishIsFenced(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	ctx := context.Background()
	createTable(t, s, "CREATE TABLE effects (job_id int)")
	insert(t, s, t0, job("k"))
	j := claim(t, s, t0, 1)[0]
	complete := func(token string) error {
		return s.WriteTx(ctx, func(ctx context.Context, tx *Tx) error {
			if _, err := tx.ExecContext(ctx, "INSERT INTO effects VALUES (?)", j.ID); err != nil {
				return err
			}
			errs, err := s.JobFinishManyTx(ctx, tx, []*store.JobFinishParams{{ID: j.ID, LeaseToken: token,
				State: idemtype.StateCompleted, FinishedAt: t0.Add(time.Second)}})
			if err != nil {
				return err
			}
			return errs[0]
		})
	}
	if err := complete("stale"); !errors.Is(err, idemtype.ErrLeaseLost) {
		t.Fatalf("stale completion: %v, want ErrLeaseLost", err)
	}
	if n := countRows(t, s, "effects"); n != 0 {
		t.Fatalf("effects after a fenced completion: %d", n)
	}
	if err := complete(j.LeaseToken); err != nil {
		t.Fatal(err)
	}
	if got := getJob(t, s, j.ID); got.State != idemtype.StateCompleted || countRows(t, s, "effects") != 1 {
		t.Fatalf("after the real completion: %s, %d effects", got.State, countRows(t, s, "effects"))
	}
}

// TestWriteTxGuards: a Tx is dead after its function returns, and a store
// write made with the function's context is refused instead of waiting for
// the writer that runs it (a deadlock).
func TestWriteTxGuards(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	other := openTest(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var kept *Tx
	err := s.WriteTx(ctx, func(ctx context.Context, tx *Tx) error {
		kept = tx
		if _, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{job("k")}}); !errors.Is(err, errWriteInTx) {
			return fmt.Errorf("nested write: %v, want errWriteInTx", err)
		}
		if _, err := other.JobInsertManyTx(ctx, tx, &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{job("k")}}); err == nil {
			return errors.New("a Tx of another store was accepted")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kept.ExecContext(ctx, "SELECT 1"); !errors.Is(err, ErrTxDone) {
		t.Fatalf("Exec after the function returned: %v", err)
	}
	if _, err := s.JobInsertManyTx(ctx, kept, &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{job("k")}}); !errors.Is(err, ErrTxDone) {
		t.Fatalf("insert after the function returned: %v", err)
	}
}

// TestWriteTxRunsOnceUnderFailingNeighbours races caller transactions
// against writes that fail after writing (which make a group commit roll
// back and run again with savepoints): every caller function runs exactly
// once, and exactly the committed ones left their row and their job.
// Overlap: 8 goroutines submit both kinds at once, so the writer gathers
// them into shared groups.
func TestWriteTxRunsOnceUnderFailingNeighbours(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	ctx := context.Background()
	createTable(t, s, "CREATE TABLE marks (g int, i int)")
	const goroutines, per = 8, 40
	var runs, committed atomic.Int64
	var wg sync.WaitGroup
	boom := errors.New("boom")
	for g := range goroutines {
		wg.Add(2)
		go func() { // failing neighbours: they write, then fail
			defer wg.Done()
			for range per {
				err := s.write(ctx, 1, func(t *wtx) error {
					if _, err := t.exec("INSERT INTO marks VALUES (-1, -1)"); err != nil {
						return err
					}
					return boom
				})
				if !errors.Is(err, boom) {
					t.Errorf("failing op: %v", err)
				}
			}
		}()
		go func() {
			defer wg.Done()
			for i := range per {
				err := s.WriteTx(ctx, func(ctx context.Context, tx *Tx) error {
					runs.Add(1)
					if _, err := tx.ExecContext(ctx, "INSERT INTO marks VALUES (?, ?)", g, i); err != nil {
						return err
					}
					if _, err := s.JobInsertManyTx(ctx, tx, &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{job("mark")}, Now: t0}); err != nil {
						return err
					}
					if i%5 == 4 {
						return boom
					}
					return nil
				})
				switch {
				case err == nil:
					committed.Add(1)
				case !errors.Is(err, boom):
					t.Errorf("WriteTx: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	if got, want := runs.Load(), int64(goroutines*per); got != want {
		t.Fatalf("caller functions ran %d times for %d WriteTx calls", got, want)
	}
	if n := countRows(t, s, "marks"); int64(n) != committed.Load() {
		t.Fatalf("%d rows for %d committed transactions (failing neighbours' rows must roll back)", n, committed.Load())
	}
	jobs, _, err := s.JobList(ctx, &store.JobListParams{Filter: store.JobFilter{Kind: "mark"}, Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(jobs)) != committed.Load() {
		t.Fatalf("%d jobs for %d committed transactions", len(jobs), committed.Load())
	}
}

// TestWriteTxPanicRollsBackAndReachesTheCaller: a panic in the function
// (which runs on the writer's goroutine) rolls its writes back, is raised
// in the caller's goroutine, and leaves the store working.
func TestWriteTxPanicRollsBackAndReachesTheCaller(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	ctx := context.Background()
	createTable(t, s, "CREATE TABLE marks (n int)")
	got := func() (r any) {
		defer func() { r = recover() }()
		_ = s.WriteTx(ctx, func(ctx context.Context, tx *Tx) error {
			if _, err := tx.ExecContext(ctx, "INSERT INTO marks VALUES (1)"); err != nil {
				return err
			}
			panic("handler bug")
		})
		return nil
	}()
	if got != "handler bug" {
		t.Fatalf("recovered %v, want the function's panic", got)
	}
	if n := countRows(t, s, "marks"); n != 0 {
		t.Fatalf("%d rows after a panic, want the write rolled back", n)
	}
	insert(t, s, t0, job("k")) // the writer still runs
}
