package idemhttp_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store"
)

// disconnectStore is a real store whose JobClaim, once armed, makes the
// pull client go away right after the claim committed: it cancels the
// client's request and waits until the server's request context, and
// every context the server derived from it, is done (goneClaim) before
// handing the claimed jobs back to the server.
type disconnectStore struct {
	store.Store
	t       *testing.T
	armed   chan struct{}          // closed by the test to arm the hook
	cancel  context.CancelFunc     // cancels the client's request
	reqDone chan (<-chan struct{}) // closed once the server's request contexts are done
	fired   chan struct{}          // closed once the hook ran
}

func (s *disconnectStore) JobClaim(ctx context.Context, p *store.JobClaimParams) ([]*idem.JobRow, error) {
	jobs, err := s.Store.JobClaim(ctx, p)
	select {
	case <-s.armed:
	default:
		return jobs, err
	}
	return s.afterClaim(jobs, err)
}

// afterClaim is the hook once armed: on the first claim that took jobs,
// the client goes away and the claim returns once the server saw it.
func (s *disconnectStore) afterClaim(jobs []*idem.JobRow, err error) ([]*idem.JobRow, error) {
	if err != nil || len(jobs) == 0 {
		return jobs, err
	}
	select {
	case <-s.fired:
		return jobs, err
	default:
	}
	s.cancel()
	select {
	case done := <-s.reqDone:
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			s.t.Error("the server's request context was not done after the client went away")
		}
	case <-time.After(30 * time.Second):
		s.t.Error("no claim request reached the server")
	}
	close(s.fired)
	return jobs, err
}

// TestClaimClientGone (both stores): a pull client that goes away right
// after its claim committed (the store call returns after the server's
// request context is done) leaves no job running: the claimed job is
// given back at once, available with its attempt not used.
func TestClaimClientGone(t *testing.T) {
	t.Parallel()
	bothStores(t, testClaimClientGone)
}

func testClaimClientGone(t *testing.T, open opener) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ds := &disconnectStore{t: t, armed: make(chan struct{}), cancel: cancel,
		reqDone: make(chan (<-chan struct{}), 1), fired: make(chan struct{})}
	e := setup(t, func(t *testing.T) store.Store { ds.Store = open(t); return ds }, nil)
	id := e.enqueue(e.keyA, map[string]any{"kind": "pull", "queue": "gone"})
	ds.goneClaim(ctx, t, e, `{"queues":["gone"],"worker_id":"w1","lease":"30s","wait":"5s"}`)
	select {
	case <-ds.fired:
	default:
		t.Fatal("the hook did not run: nothing was claimed")
	}
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	row, err := e.client.JobGet(context.Background(), "a", n)
	if err != nil {
		t.Fatal(err)
	}
	if row.State != idem.StateAvailable || row.Attempt != 0 || row.LeaseToken != "" {
		t.Fatalf("job %s after the client went away: state %s, attempt %d, lease %q; want available, attempt 0, no lease",
			id, row.State, row.Attempt, row.LeaseToken)
	}
	// The job is claimable again at once, as its first attempt.
	if j := e.claim(e.keyA, "gone"); j["id"] != id || j["attempt"] != float64(1) {
		t.Fatalf("re-claim %v, want job %s at attempt 1", j, id)
	}
}

// goneClaim arms ds and sends the claim body as key A's through a server
// in front of e's that hands ds a channel closed once the request's
// context and those the server derived from it are done; ds's hook
// cancels ctx (the client goes away) once the store's claim returned. It
// fails t unless the client saw its own cancellation and the handler
// returned.
func (ds *disconnectStore) goneClaim(ctx context.Context, t *testing.T, e *env, body string) {
	t.Helper()
	served := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/claim" {
			e.server.ServeHTTP(w, r)
			return
		}
		defer close(served)
		// The server sees the client go away only through net/http ending
		// the request's context, but the claim checks a context the
		// server derived from it (Drain's, a long poll's key watch), and
		// the context package ends those after the request's Done channel
		// closes: a hook released by that channel could return while the
		// claim's context was still live, and the claim then handed its
		// job to nobody (1 to 3 runs in 1,000 under load, GOMAXPROCS 4 or
		// 8 on 2 busy cores: "state running, attempt 1"). So the server
		// serves the request under a context of the test's, ended once
		// net/http ended the request's; its cancel ends every context
		// derived from it before it returns, and only then is gone
		// closed, which the hook waits for.
		ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
		defer cancel()
		gone := make(chan struct{})
		stop := context.AfterFunc(r.Context(), func() {
			cancel()
			close(gone)
		})
		defer stop()
		ds.reqDone <- gone
		e.server.ServeHTTP(w, r.WithContext(ctx))
	}))
	t.Cleanup(srv.Close)
	close(ds.armed)
	req, err := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/claim", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+e.keyA)
	res, err := srv.Client().Do(req)
	if err == nil {
		res.Body.Close()
		t.Fatalf("claim answered %d; want the client to have gone away", res.StatusCode)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("claim: %v, want the client's cancellation", err)
	}
	select {
	case <-served:
	case <-time.After(30 * time.Second):
		t.Fatal("the claim handler did not return")
	}
}
