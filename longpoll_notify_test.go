package idem_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/pgstore"
)

// TestLongPollHearsAnotherProcessInsert (PostgreSQL): a pull claim
// long-polling on a started client without queues of its own (idem serve
// working only for pull workers) is woken by a job another client on its
// own store handle (another process) enqueues, through the store's
// LISTEN/NOTIFY — not by its poll, an hour away here. Before, the notifier
// listened only for clients with queues and relayed announcements to
// producers only: such a claim learnt of another node's job at its next
// poll (100 ms by default), or here only when its wait ended.
func TestLongPollHearsAnotherProcessInsert(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, second := openLeaseStore(t, "postgres")
	claims := &claimCounter{Store: st.(*pgstore.Store), first: make(chan struct{})}
	server, err := idem.NewClient(claims, &idem.Config{Logger: quietLogger(), PollInterval: time.Hour, DisableMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := server.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Stop(ctx) })
	other, err := idem.NewClient(second(), &idem.Config{Logger: quietLogger(), DisableMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	waitListening(t, claims.Schema(), 1)

	type claimed struct {
		jobs []*idem.JobRow
		err  error
	}
	got := make(chan claimed, 1)
	// The claim's own context ends long before its wait (60 s) and its
	// poll (an hour): only a wake-up can hand it the job.
	cctx, cancel := context.WithTimeout(ctx, leaseTimeout)
	defer cancel()
	go func() {
		jobs, err := server.Claim(cctx, idem.ClaimParams{Queues: []string{"pull"}, WorkerID: "w", Limit: 1,
			Wait: idem.MaxClaimWait})
		got <- claimed{jobs, err}
	}()
	// Enqueue once the claim's first look found nothing: from then on only
	// a wake-up ends its wait before its context.
	select {
	case <-claims.first:
	case <-cctx.Done():
		t.Fatal("the claim never looked")
	}
	if _, err := other.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "k", Opts: &idem.EnqueueOpts{Queue: "pull"}}); err != nil {
		t.Fatal(err)
	}
	c := <-got
	if c.err != nil || len(c.jobs) != 1 {
		t.Fatalf("the long poll returned %d jobs, %v; want the job another client enqueued (it heard nothing)", len(c.jobs), c.err)
	}
}

// claimCounter is a PostgreSQL store whose first JobClaim closes first when
// it returns.
type claimCounter struct {
	*pgstore.Store
	once  sync.Once
	first chan struct{}
}

func (c *claimCounter) JobClaim(ctx context.Context, p *store.JobClaimParams) ([]*idem.JobRow, error) {
	jobs, err := c.Store.JobClaim(ctx, p)
	c.once.Do(func() { close(c.first) })
	return jobs, err
}
