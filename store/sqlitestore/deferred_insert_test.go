package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// holdWriter runs an op that blocks the writer until the returned release
// is called, so that the ops submitted meanwhile queue up for its next
// group; it returns once the op runs.
func holdWriter(t *testing.T, s *Store) (release func()) {
	t.Helper()
	running, gate := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.write(context.Background(), 1, func(*wtx) error {
			close(running)
			<-gate
			return nil
		})
	}()
	waitSignal(t, running, "held writer op")
	return func() {
		close(gate)
		if err := waitSignal(t, done, "held writer op's answer"); err != nil {
			t.Fatal(err)
		}
	}
}

// enqueueRound submits one plain job from each of n goroutines while the
// writer is held, then releases it; kinds[i] is job i's kind. It returns
// each call's result.
func enqueueRound(t *testing.T, s *Store, round int, kinds []string) []store.JobInsertResult {
	t.Helper()
	release := holdWriter(t, s)
	out := make([]store.JobInsertResult, len(kinds))
	var ready, wg sync.WaitGroup
	for i, kind := range kinds {
		ready.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := job(kind)
			p.Args = json.RawMessage(fmt.Sprintf(`{"round":%d,"i":%d}`, round, i))
			ready.Done()
			res, err := s.JobInsertMany(context.Background(), &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{p}})
			if err != nil {
				out[i].Err = err
				return
			}
			out[i] = res[0]
		}()
	}
	ready.Wait()
	release()
	wg.Wait()
	return out
}

// checkStored: every job enqueued without error is stored with its own
// args, under an id no other call got.
func checkStored(t *testing.T, s *Store, round int, res []store.JobInsertResult, seen map[int64]bool) {
	t.Helper()
	for i, r := range res {
		if r.Err != nil {
			continue
		}
		if seen[r.Job.ID] {
			t.Fatalf("round %d: id %d given twice", round, r.Job.ID)
		}
		seen[r.Job.ID] = true
		got, err := s.JobGet(context.Background(), &store.JobGetParams{ID: r.Job.ID})
		if err != nil {
			t.Fatalf("round %d: job %d of call %d: %v", round, r.Job.ID, i, err)
		}
		if want := fmt.Sprintf(`{"round":%d,"i":%d}`, round, i); string(got.Args) != want {
			t.Fatalf("round %d: job %d of call %d holds %s, want %s", round, r.Job.ID, i, got.Args, want)
		}
	}
}

// TestDeferredPlainInsertsMerge: one-job enqueues queued together go in
// as one multi-row INSERT (wtx.deferred), and each call still gets its own
// job, stored with its own args under its own id.
func TestDeferredPlainInsertsMerge(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	seen := map[int64]bool{}
	kinds := make([]string, 12)
	for i := range kinds {
		kinds[i] = "k"
	}
	for round := 0; round < 50 && s.w.tx.merged.Load() == 0; round++ {
		res := enqueueRound(t, s, round, kinds)
		for i, r := range res {
			if r.Err != nil {
				t.Fatalf("round %d, call %d: %v", round, i, r.Err)
			}
		}
		checkStored(t, s, round, res, seen)
	}
	if s.w.tx.merged.Load() == 0 {
		t.Fatal("in 50 rounds of 12 enqueues queued behind a held writer, no group merged the rows of two")
	}
}

// TestDeferredPlainInsertFailureIsItsOwn: when the merged INSERT of a
// group's one-job enqueues fails (here a trigger refuses one job), the
// group runs again with a savepoint and an INSERT per op: the refused job
// gets the error, every other call its job.
func TestDeferredPlainInsertFailureIsItsOwn(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "idem.db")
	s, err := Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TRIGGER refuse_boom BEFORE INSERT ON jobs WHEN NEW.kind = 'boom'
BEGIN SELECT RAISE(ABORT, 'boom refused'); END`); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	kinds := make([]string, 12)
	for i := range kinds {
		kinds[i] = "k"
	}
	kinds[5] = "boom"
	for round := 0; round < 50 && s.w.tx.mergeFailed.Load() == 0; round++ {
		res := enqueueRound(t, s, round, kinds)
		for i, r := range res {
			switch {
			case i == 5 && r.Err == nil:
				t.Fatalf("round %d: the refused job was enqueued as %d", round, r.Job.ID)
			case i == 5 && errors.Is(r.Err, idemtype.ErrInvalid):
				t.Fatalf("round %d: the refused job's error is %v, want the database's", round, r.Err)
			case i != 5 && r.Err != nil:
				t.Fatalf("round %d: call %d failed with the refused job: %v", round, i, r.Err)
			}
		}
		checkStored(t, s, round, res, seen)
	}
	if s.w.tx.mergeFailed.Load() == 0 {
		t.Fatal("in 50 rounds no merged INSERT met the refused job")
	}
}
