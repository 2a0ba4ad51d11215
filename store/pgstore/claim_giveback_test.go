package pgstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestGiveBackWaitsForClaimCommittingAfterItsError: a claim whose context
// ends while the server still runs its transaction returns an error, and
// the server may commit it afterwards (pgx closes the connection; the
// backend runs what it already received, COMMIT included). The give-back
// of that claim (JobReleaseMany with ClaimToken) must not run between:
// after both, no job may be left running under the claim's token.
//
// Each case gates the claim at its COMMIT (a deferred trigger on jobs
// updated to running waits for an advisory lock the test holds), so that
// its jobs UPDATE ran and its commit is pending, cuts the claim off by
// cancelling its context, starts the give-back (from a second Store on the
// schema, as another node would), waits until it returned or waits for a
// lock, and only then opens the gate. pgx follows a cut-off call with a
// cancel request, which would abort the waiting COMMIT; in production it
// may arrive after the commit (or between two statements of the pipeline,
// where the server ignores it). The claiming Store's dialer holds new
// connections, the cancel request's included, until the gate is open: the
// cancel arrives late, deterministically. Before the claim
// token's lock (claim_token_lock.go) the give-back returned 0 at once and
// the claim then committed: the job stayed running under a token nobody
// held.
func TestGiveBackWaitsForClaimCommittingAfterItsError(t *testing.T) {
	t.Parallel()
	rate := &store.Limit{FlowScope: store.FlowScope{Queue: "q"}, Rate: 1000, Period: time.Minute}
	conc := &store.Limit{FlowScope: store.FlowScope{Queue: "q"}, Concurrency: 100}
	for i, c := range []struct {
		name     string
		queues   []string
		limit    *store.Limit
		reserved bool
		mode     oneRoundMode
	}{
		{name: "fast", queues: []string{"q"}, mode: oneRoundAuto},
		{name: "several_queues", queues: []string{"q", "r"}, mode: oneRoundAuto},
		{name: "one_round_limited", queues: []string{"q"}, limit: conc, mode: oneRoundAlways},
		{name: "general_limited", queues: []string{"q"}, limit: conc, mode: oneRoundNever},
		{name: "reserved", queues: []string{"q"}, limit: rate, reserved: true, mode: oneRoundAlways},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			sc, s, dials := lateCancelStores(t)
			sc.noReserve, sc.oneRoundMode = !c.reserved, c.mode
			now := time.Now().UTC().Truncate(time.Microsecond)
			if c.limit != nil {
				putLimits(t, s, now, *c.limit)
			}
			insertJobs(t, s, now, []string{"t1"}, 1)
			giveBackAfterLateCommit(t, sc, s, dials, now, c.queues, int64(737100+i))
		})
	}
}

// heldDials holds the dials of a pool while held (hold, then let).
type heldDials struct {
	held atomic.Bool
	mu   sync.Mutex
	let  chan struct{}
}

func (h *heldDials) hold() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.let = make(chan struct{})
	h.held.Store(true)
}

func (h *heldDials) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held.Swap(false) {
		close(h.let)
	}
}

func (h *heldDials) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if h.held.Load() {
		h.mu.Lock()
		let := h.let
		h.mu.Unlock()
		select {
		case <-let:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// lateCancelStores opens two Stores on one new schema: sc, whose dials
// (cancel requests included) dials can hold, and s.
func lateCancelStores(t *testing.T) (sc, s *Store, dials *heldDials) {
	t.Helper()
	url, schema := dbtest.NewSchema(t)
	ctx := context.Background()
	s, err := Open(ctx, withPoolSize(url, 4), &Config{CallerClock: true, Schema: schema})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	pcfg, err := PoolConfig(withPoolSize(url, 4))
	if err != nil {
		t.Fatal(err)
	}
	dials = &heldDials{}
	pcfg.ConnConfig.DialFunc = dials.dial
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if sc, err = New(ctx, pool, &Config{CallerClock: true, Schema: schema}); err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { dials.release(); _ = sc.Close() })
	return sc, s, dials
}

// giveBackAfterLateCommit runs one case of
// TestGiveBackWaitsForClaimCommittingAfterItsError: sc claims (its dials
// held from its cut-off on), s gives back; the schema's one job is
// available in queue "q"; gateKey is the case's own advisory lock key.
func giveBackAfterLateCommit(t *testing.T, sc, s *Store, dials *heldDials, now time.Time, queues []string, gateKey int64) {
	ctx := t.Context()
	if _, err := s.pool.Exec(ctx, s.sql(fmt.Sprintf(`
CREATE FUNCTION {schema}.gate_claims() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_advisory_xact_lock_shared(%d); RETURN NULL; END $$;
CREATE CONSTRAINT TRIGGER gate_claims AFTER UPDATE ON {schema}.jobs DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (NEW.state = 'running') EXECUTE FUNCTION {schema}.gate_claims()`, gateKey))); err != nil {
		t.Fatal(err)
	}
	gate, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer gate.Release()
	if _, err := gate.Exec(ctx, "SELECT pg_advisory_lock($1)", gateKey); err != nil {
		t.Fatal(err)
	}
	opened := false
	open := func() {
		if !opened {
			opened = true
			if _, err := gate.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", gateKey); err != nil {
				t.Error(err)
			}
			// The held dials (pgx's cancel request among them) go only
			// once the claim's transaction has ended: a cancel request
			// reaching the gated COMMIT first would abort it, and the
			// late commit this test is about would not happen.
			waitNoGateWaiter(t, s, gateKey)
		}
		dials.release()
	}
	defer open()

	token := "tok-gated-" + s.schema
	cctx, cut := context.WithCancel(ctx)
	defer cut()
	claimed := make(chan error, 1)
	go func() {
		jobs, err := sc.JobClaim(cctx, &store.JobClaimParams{Queues: queues, WorkerID: "w", Limit: 1,
			LeaseUntil: now.Add(time.Hour), Now: now, LeaseToken: token})
		if err == nil {
			err = fmt.Errorf("the claim returned %d jobs, want an error (its commit waits at the gate)", len(jobs))
		}
		claimed <- err
	}()
	waitAdvisoryWaiter(t, s, int(gateKey)) // the claim's jobs UPDATE ran; its commit waits
	dials.hold()
	cut()
	if err := <-claimed; !errors.Is(err, context.Canceled) {
		t.Fatalf("claim: %v, want its context's cancellation", err)
	}

	type result struct {
		n   int
		err error
	}
	released := make(chan result, 1)
	go func() {
		n, err := s.JobReleaseMany(ctx, &store.JobReleaseManyParams{ClaimToken: token, Now: now})
		released <- result{n, err}
	}()
	var r result
	if waitTokenWaiter(t, s, token, released, &r) {
		open() // the give-back waits for the claim: let the claim commit
		r = <-released
	} else {
		open() // the give-back is over: the claim commits after it
	}
	if r.err != nil {
		t.Fatalf("give back: %v", r.err)
	}
	waitNoGateWaiter(t, s, gateKey)
	var state, lease string
	var attempt int
	if err := s.pool.QueryRow(ctx, s.sql(`SELECT state, lease_token, attempt FROM {schema}.jobs`)).Scan(&state, &lease, &attempt); err != nil {
		t.Fatal(err)
	}
	if r.n != 1 || state != "available" || attempt != 0 {
		t.Fatalf("after the give-back (%d released) and the claim's late commit the job is %s under %q, attempt %d; "+
			"want 1 released, the job available, attempt 0 (none left running under the dead token)", r.n, state, lease, attempt)
	}
}

// waitTokenWaiter waits until a backend waits for a two-key advisory lock
// whose second key is hashtext(token) (true), or until the give-back
// reports on done (false, its result in r).
func waitTokenWaiter[R any](t *testing.T, s *Store, token string, done <-chan R, r *R) bool {
	t.Helper()
	returned := func() bool {
		select {
		case *r = <-done:
			return true
		default:
			return false
		}
	}
	return dbtest.UntilLocks(t, s.pool, true, returned, "the give-back neither returned nor waited for the claim's token lock",
		`SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2 AND NOT granted
  AND objid::bigint = (hashtext($1)::bigint + 4294967296) % 4294967296)`, token)
}

// waitNoGateWaiter waits until nobody waits for or holds the gate key
// (the claim's transaction ended, committed or not).
func waitNoGateWaiter(t *testing.T, s *Store, key int64) {
	t.Helper()
	dbtest.UntilLocks(t, s.pool, false, nil, "the gated claim's transaction did not end", `SELECT EXISTS (SELECT 1 FROM pg_locks
WHERE locktype = 'advisory' AND objsubid = 1 AND objid = $1)`, key)
}
