package storetest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// testRaceCancelDueJobs: claimers, the promoter, a canceller and a deleter
// race over due scheduled and retryable jobs of three tenants, which every
// claim first makes available (migration 0031), under a concurrency limit
// of the queue when limited (the locking claims, whose promoted rows stay
// locked while they wait for the limits' locks). No call fails (a
// deadlock would), each job is claimed at most once, a job cancelled
// while it was not running (nothing voided) or deleted is never claimed,
// a cancelled job ends cancelled, and every other job is claimed.
func testRaceCancelDueJobs(t *testing.T, s store.Store, limited bool) {
	mk := func(i int, runAt time.Duration) *store.JobInsertParams {
		p := newJob("k")
		p.Tenant, p.Queue, p.RunAt = fmt.Sprint("t", i%3), "q", at(runAt)
		return p
	}
	var ps, rs []*store.JobInsertParams
	for i := range 300 {
		ps = append(ps, mk(i, time.Minute+time.Duration(i)*time.Millisecond))
	}
	for i := range 60 {
		rs = append(rs, mk(i, 0))
	}
	jobs := insertNew(t, s, at(0), ps...)
	insertNew(t, s, at(0), rs...)
	for _, c := range claimWith(t, s, &store.JobClaimParams{Queues: []string{"q"}, WorkerID: "w0", Limit: 60,
		LeaseUntil: at(lease), Now: at(0)}) {
		finish1(t, s, failure(c, idemtype.StateRetryable, idemtype.OutcomeFailed, "x", at(time.Minute), at(time.Second)))
		jobs = append(jobs, c)
	}
	if len(jobs) != 360 {
		t.Fatalf("%d jobs, want 360", len(jobs))
	}
	if limited {
		putLimit(t, s, store.Limit{FlowScope: store.FlowScope{Queue: "q"}, Concurrency: 1000})
	}
	now := at(2 * time.Minute)
	var (
		mu        sync.Mutex
		claimed   = map[int64]int{}
		cancelled = map[int64]bool{} // id: the cancel voided a running claim
		deleted   = map[int64]bool{}
		busy      atomic.Int32
	)
	busy.Store(2) // the canceller and the deleter
	err := parallel(7, func(g int) error {
		ctx := t.Context()
		switch g {
		case 0: // the canceller: every third job
			defer busy.Add(-1)
			for i := 0; i < len(jobs); i += 3 {
				var v store.Lease
				_, err := s.JobCancel(ctx, &store.JobCancelParams{ID: jobs[i].ID, Now: now, Voided: &v})
				if err != nil {
					return fmt.Errorf("cancel job %d: %w", jobs[i].ID, err)
				}
				mu.Lock()
				cancelled[jobs[i].ID] = v.ID != 0
				mu.Unlock()
			}
			return nil
		case 1: // the deleter: every third job after, while scheduled or retryable
			defer busy.Add(-1)
			for i := 1; i < len(jobs); i += 3 {
				for _, st := range []idemtype.JobState{idemtype.StateScheduled, idemtype.StateRetryable} {
					err := s.JobDelete(ctx, &store.JobDeleteParams{ID: jobs[i].ID, State: st})
					if err == nil {
						mu.Lock()
						deleted[jobs[i].ID] = true
						mu.Unlock()
						break
					}
					if !errors.Is(err, idemtype.ErrNotFound) && !errors.Is(err, idemtype.ErrWrongState) {
						return fmt.Errorf("delete job %d: %w", jobs[i].ID, err)
					}
				}
			}
			return nil
		case 2: // the promoter
			for busy.Load() > 0 {
				if _, err := s.JobPromote(ctx, &store.JobPromoteParams{Now: now, Limit: 20}); err != nil {
					return err
				}
			}
			return nil
		}
		for {
			done := busy.Load() == 0
			got, err := s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, WorkerID: fmt.Sprint("w", g),
				Limit: 7, LeaseUntil: now.Add(time.Hour), Now: now})
			if err != nil {
				return err
			}
			mu.Lock()
			for _, j := range got {
				claimed[j.ID]++
			}
			mu.Unlock()
			if done && len(got) == 0 {
				return nil
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		id := j.ID
		switch n := claimed[id]; {
		case n > 1:
			t.Errorf("job %d claimed %d times", id, n)
		case deleted[id] && n > 0:
			t.Errorf("job %d deleted, and claimed", id)
		case deleted[id]:
		default:
			voided, wasCancelled := cancelled[id]
			if wasCancelled {
				wantState(t, s, id, idemtype.StateCancelled)
				if !voided && n > 0 {
					t.Errorf("job %d cancelled while not running (nothing voided), and claimed", id)
				}
				if voided && n == 0 {
					t.Errorf("job %d: its cancel voided a claim nobody returned", id)
				}
			} else if n == 0 {
				t.Errorf("job %d (%s) neither cancelled, deleted nor claimed", id, mustGet(t, s, id).State)
			}
		}
	}
}
