package idem_test

import (
	"context"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// claimsSeen is a SQLite store (Announce included) that tells each claim's
// number of jobs once it returned.
type claimsSeen struct {
	*sqlitestore.Store
	claims chan int
}

func (s *claimsSeen) JobClaim(ctx context.Context, p *store.JobClaimParams) ([]*idemtype.JobRow, error) {
	jobs, err := s.Store.JobClaim(ctx, p)
	s.claims <- len(jobs)
	return jobs, err
}

// TestLongPollWakesWhenCancelHoldEnds: a FIFO partition's head A is
// claimed by a pull worker and cancelled; its handler never acknowledges,
// so A holds the partition until the rescuer finds A's lease ended. A
// long-polling claim of the queue (no poll tick for an hour) waiting for
// the partition's next job B gets B as soon as the rescuer ended the hold:
// the SQLite store announces the hold's end as PostgreSQL NOTIFYs it.
// Before the fix nothing woke the claim, which got B only at its next poll
// or after its whole wait, empty-handed.
func TestLongPollWakesWhenCancelHoldEnds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := &claimsSeen{Store: testStore(t), claims: make(chan int, 16)}
	c, err := idem.NewClient(st, &idem.Config{Logger: quietLogger(), PollInterval: time.Hour, DisableMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	opts := &idem.EnqueueOpts{Queue: "fifo", PartitionKey: "entity"}
	a, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "a", Opts: opts})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "b", Opts: opts})
	if err != nil {
		t.Fatal(err)
	}
	p := idem.ClaimParams{Queues: []string{"fifo"}, WorkerID: "w", Lease: time.Minute}
	got, err := c.Claim(ctx, p)
	if err != nil || len(got) != 1 || got[0].ID != a.Job.ID {
		t.Fatalf("claim of the head: %v %v", got, err)
	}
	<-st.claims
	if _, err := c.JobCancel(ctx, "", a.Job.ID); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		jobs []*idem.JobRow
		err  error
	}
	done := make(chan answer, 1)
	pollCtx, stopPoll := context.WithCancel(ctx)
	defer stopPoll()
	go func() {
		p.Wait = idem.MaxClaimWait
		jobs, err := c.Claim(pollCtx, p)
		done <- answer{jobs, err}
	}()
	// The long poll's first claim found nothing (A holds the partition):
	// it now waits for an announcement of its queue.
	if n := <-st.claims; n != 0 {
		t.Fatalf("the long poll claimed %d jobs while A holds the partition", n)
	}
	announced, stopWaiting := idem.WaitAnnounced(c, []string{"fifo"})
	defer stopWaiting()
	if _, err := st.JobRescue(ctx, &store.JobRescueParams{Now: time.Now().Add(2 * time.Minute), Limit: 100}); err != nil {
		t.Fatal(err)
	}
	// The announcement is made before JobRescue returns.
	select {
	case <-announced:
	default:
		stopPoll()
		<-done
		t.Fatal("the rescuer ended A's hold without announcing queue fifo: the long poll waits for its next poll")
	}
	res := <-done
	if res.err != nil || len(res.jobs) != 1 || res.jobs[0].ID != b.Job.ID {
		t.Fatalf("the long poll after the hold ended got %v %v, want job B (%d)", res.jobs, res.err, b.Job.ID)
	}
}
