package sqlitestore

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/store"
)

// TestDeferredInsertsAmongOtherOps: groups that mix one-job plain
// enqueues (deferred: wtx.deferred) with keyed enqueues, claims, cancels
// and WriteTx calls (whose own insert must see the ids of the deferred
// rows before it, and which reads its own job back) still give every
// acknowledged job exactly once, with its own args under its own id; no
// claim returns a job twice or one that was never acknowledged.
func TestDeferredInsertsAmongOtherOps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t, nil)
	type acked struct {
		id   int64
		args string
	}
	var mu sync.Mutex
	var all []acked
	claimed := map[int64]int{}
	note := func(id int64, args string) {
		mu.Lock()
		defer mu.Unlock()
		all = append(all, acked{id, args})
	}
	var prev []int64 // plain jobs of the previous round (cancel targets)
	for round := range 30 {
		release := holdWriter(t, s)
		var ready, wg sync.WaitGroup
		var mine []int64
		var mineMu sync.Mutex
		run := func(fn func()) {
			ready.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				ready.Done()
				fn()
			}()
		}
		for i := range 8 {
			run(func() {
				p := job("plain")
				args := fmt.Sprintf(`{"round":%d,"plain":%d}`, round, i)
				p.Args = json.RawMessage(args)
				res, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{p}})
				if err != nil || res[0].Err != nil {
					t.Errorf("plain enqueue: %v %+v", err, res)
					return
				}
				note(res[0].Job.ID, args)
				mineMu.Lock()
				mine = append(mine, res[0].Job.ID)
				mineMu.Unlock()
			})
		}
		for i := range 2 {
			run(func() {
				p := keyedJob("keyed", fmt.Sprintf("k-%d-%d", round, i), "fp")
				args := fmt.Sprintf(`{"round":%d,"keyed":%d}`, round, i)
				p.Args = json.RawMessage(args)
				res, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{p}})
				if err != nil || res[0].Err != nil || res[0].Existing {
					t.Errorf("keyed enqueue: %v %+v", err, res)
					return
				}
				note(res[0].Job.ID, args)
			})
		}
		run(func() {
			jobs, err := s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"default"}, WorkerID: "w", Limit: 3,
				LeaseUntil: t0.Add(2 * time.Hour), Now: t0.Add(time.Hour)})
			if err != nil {
				t.Errorf("claim: %v", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, j := range jobs {
				claimed[j.ID]++
			}
		})
		if len(prev) > 0 {
			id := prev[0]
			run(func() {
				if _, err := s.JobCancel(ctx, &store.JobCancelParams{ID: id, Reason: "mixed"}); err != nil {
					t.Errorf("cancel %d: %v", id, err)
				}
			})
		}
		if round%3 == 0 {
			run(func() {
				args := fmt.Sprintf(`{"round":%d,"tx":0}`, round)
				var id int64
				err := s.WriteTx(ctx, func(ctx context.Context, tx *Tx) error {
					p := job("tx")
					p.Args = json.RawMessage(args)
					res, err := s.JobInsertManyTx(ctx, tx, &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{p}})
					if err != nil || res[0].Err != nil {
						return fmt.Errorf("insert in tx: %v %+v", err, res)
					}
					id = res[0].Job.ID
					row, err := tx.QueryRowContext(ctx, `SELECT args FROM jobs WHERE id = ?`, id)
					if err != nil {
						return err
					}
					var got string
					if err := row.Scan(&got); err != nil {
						return fmt.Errorf("read back job %d in tx: %w", id, err)
					}
					if got != args {
						return fmt.Errorf("job %d read back in tx holds %s, want %s", id, got, args)
					}
					return nil
				})
				if err != nil {
					t.Errorf("WriteTx: %v", err)
					return
				}
				note(id, args)
			})
		}
		ready.Wait()
		release()
		wg.Wait()
		prev = mine
	}
	seen := map[int64]bool{}
	for _, a := range all {
		if seen[a.id] {
			t.Fatalf("id %d acknowledged twice", a.id)
		}
		seen[a.id] = true
		got, err := s.JobGet(ctx, &store.JobGetParams{ID: a.id})
		if err != nil {
			t.Fatalf("acknowledged job %d: %v", a.id, err)
		}
		if string(got.Args) != a.args {
			t.Fatalf("job %d holds %s, want %s", a.id, got.Args, a.args)
		}
	}
	for id, n := range claimed {
		if n != 1 || !seen[id] {
			t.Fatalf("job %d claimed %d times (acknowledged: %v)", id, n, seen[id])
		}
	}
	var n int
	if err := s.rdb.QueryRow(`SELECT count(*) FROM jobs`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != len(all) {
		t.Fatalf("%d jobs stored, %d acknowledged", n, len(all))
	}
	if s.w.tx.merged.Load() == 0 || len(claimed) == 0 {
		t.Fatalf("the mix did not happen: %d merged flushes, %d jobs claimed", s.w.tx.merged.Load(), len(claimed))
	}
}
