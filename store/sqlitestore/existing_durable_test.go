package sqlitestore

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem/store"
)

// TestExistingWaitsForDurableJob: with Synchronous FULL no write
// may be acknowledged before the WAL holding it is fsynced. A keyed
// enqueue that dedups onto a job whose creating group has committed but
// not yet been fsynced must not be answered "existing" before that fsync:
// on a power loss the job it names is gone.
func TestExistingWaitsForDurableJob(t *testing.T) {
	s := openTest(t, nil) // Synchronous FULL (default)
	ctx := context.Background()
	if err := s.WaitKeyFilter(ctx); err != nil {
		t.Fatal(err)
	}
	// Key K was used before (its window has passed since), so the key
	// filter answers "maybe" for it.
	first := keyedJob("a", "K", "fp")
	first.DedupWindow = time.Hour
	insert(t, s, t0, first)

	// From now on every WAL fsync blocks until released.
	var gate atomic.Bool
	gate.Store(true)
	started := make(chan struct{}, 16)
	release := make(chan struct{})
	realSync := s.w.sync
	s.w.sync = func(path string) error {
		if gate.Load() {
			started <- struct{}{}
			<-release
		}
		return realSync(path)
	}
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()

	// B: a new job of K (the window passed): committed, waiting for fsync.
	bDone := make(chan []store.JobInsertResult, 1)
	go func() {
		res, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{keyedJob("b", "K", "fp")},
			Now: t0.Add(2 * time.Hour)})
		if err != nil {
			t.Error(err)
		}
		bDone <- res
	}()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("no fsync for B's group")
	}
	select {
	case <-bDone:
		t.Fatal("B answered before its fsync")
	default:
	}

	// C: a repeat of K. B is not durable yet, so C must not be told that
	// B's job exists before B's fsync returned.
	cDone := make(chan []store.JobInsertResult, 1)
	go func() {
		res, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{keyedJob("c", "K", "fp")},
			Now: t0.Add(2*time.Hour + time.Second)})
		if err != nil {
			t.Error(err)
		}
		cDone <- res
	}()
	var c []store.JobInsertResult
	select {
	case c = <-cDone:
		if res := c; len(res) == 1 && res[0].Job != nil {
			t.Errorf("repeat enqueue answered (existing=%v, job %d) while the group that created job %d is not fsynced yet: "+
				"a power loss now loses the job the caller was told exists", res[0].Existing, res[0].Job.ID, res[0].Job.ID)
		}
	case <-time.After(500 * time.Millisecond):
		// Not answered while the fsync is pending: correct. (A wrong
		// answer comes at once, from the read pool.)
	}
	gate.Store(false)
	close(release)
	released = true
	b := <-bDone
	if c == nil {
		c = <-cDone
	}
	if len(b) != 1 || b[0].Job == nil || len(c) != 1 || c[0].Job == nil {
		t.Fatalf("B %+v, C %+v", b, c)
	}
	if !c[0].Existing || c[0].Job.ID != b[0].Job.ID {
		t.Errorf("C after B's fsync: existing %v job %d, want B's job %d", c[0].Existing, c[0].Job.ID, b[0].Job.ID)
	}
}
