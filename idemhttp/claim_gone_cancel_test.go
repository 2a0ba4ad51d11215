package idemhttp_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store"
)

// cancelGoneStore is disconnectStore whose hook also cancels the claimed
// job (through the real store) before the client goes away: a cancel that
// comes between the claim's commit and its give-back.
type cancelGoneStore struct{ disconnectStore }

func (s *cancelGoneStore) JobClaim(ctx context.Context, p *store.JobClaimParams) ([]*idem.JobRow, error) {
	jobs, err := s.Store.JobClaim(ctx, p)
	select {
	case <-s.armed:
	default:
		return jobs, err
	}
	if err == nil && len(jobs) > 0 {
		if _, cerr := s.Store.JobCancel(context.Background(), &store.JobCancelParams{ID: jobs[0].ID, Now: time.Now()}); cerr != nil {
			s.t.Errorf("cancel: %v", cerr)
		}
	}
	return s.disconnectStore.afterClaim(jobs, err)
}

// TestClaimClientGoneCancelled (both stores): a pull client goes away
// right after its claim committed, and the claimed job was cancelled
// meanwhile. The claim cannot give it back (it is cancelled, not
// running), and nobody will run it: the claim acknowledges the cancel, so
// the job's hold (its concurrency slot, its partition, its dependants
// waiting for any outcome) ends at once rather than when the claim's
// lease ends.
func TestClaimClientGoneCancelled(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, open opener) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ds := &cancelGoneStore{disconnectStore{t: t, armed: make(chan struct{}), cancel: cancel,
			reqDone: make(chan (<-chan struct{}), 1), fired: make(chan struct{})}}
		e := setup(t, func(t *testing.T) store.Store { ds.Store = open(t); return ds }, nil)
		expect(t, e.req("PUT", "/v1/limits/queue/gone", e.admin, map[string]any{"concurrency": 1}), 200, "")
		id := e.enqueue(e.keyA, map[string]any{"kind": "pull", "queue": "gone"})
		ds.goneClaim(ctx, t, e, `{"queues":["gone"],"worker_id":"w1","lease":"60s","wait":"5s"}`)
		n, _ := strconv.ParseInt(id, 10, 64)
		row, err := e.client.JobGet(context.Background(), "a", n)
		if err != nil {
			t.Fatal(err)
		}
		if row.State != idem.StateCancelled {
			t.Fatalf("job %s after the client went away: %s, want cancelled", id, row.State)
		}
		// The queue runs one job at a time: the next job is claimable at
		// once only when the cancelled one's hold ended.
		next := e.enqueue(e.keyA, map[string]any{"kind": "pull", "queue": "gone"})
		r := e.req("POST", "/v1/claim", e.keyA, map[string]any{"queues": []string{"gone"}, "worker_id": "w2"})
		expect(t, r, 200, "")
		if jobs := r.json(t)["jobs"].([]any); len(jobs) != 1 || jobs[0].(map[string]any)["id"] != next {
			t.Fatalf("claim after the gone claim: %s; want job %s (the cancelled job's hold still takes the queue's one slot)", r.body, next)
		}
	})
}
