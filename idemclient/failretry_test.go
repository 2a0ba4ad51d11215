package idemclient_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/idem-dev/idem/idemclient"
	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/internal/sqlitetest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/pgstore"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// loseFinish is a real store whose next JobFinishMany, once armed, writes
// and then answers an error, as a PostgreSQL commit whose answer the
// network lost (the server answers 500, and keeps nothing under the
// request's Idempotency-Key).
type loseFinish struct {
	store.Store
	armed atomic.Bool
}

func (l *loseFinish) JobFinishMany(ctx context.Context, ps []*store.JobFinishParams) ([]error, error) {
	errs, err := l.Store.JobFinishMany(ctx, ps)
	if err == nil && l.armed.Swap(false) {
		return nil, errors.New("unexpected EOF")
	}
	return errs, err
}

// lostFinishClient serves the API on st behind a loseFinish.
func lostFinishClient(t *testing.T, st store.Store) (*idemclient.Client, *loseFinish) {
	t.Helper()
	lf := &loseFinish{Store: st}
	cl, _ := serveOn(t, lf, nil)
	return cl, lf
}

// TestFailRetriedAfterLostAnswer (both stores): Fail whose write committed
// but whose answer was lost (a 500) is retried by the client with the
// same body, and the retry, a repeat of the committed fail, returns the
// job: retryable, or dead with NoRetry. Before, the retry answered 409
// lease-lost and Fail returned idem.ErrLeaseLost for a fail that
// committed.
func TestFailRetriedAfterLostAnswer(t *testing.T) {
	t.Parallel()
	opens := map[string]func(t *testing.T) store.Store{
		"sqlite": func(t *testing.T) store.Store {
			st, err := sqlitestore.Open(context.Background(), sqlitetest.Path(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		},
		"postgres": func(t *testing.T) store.Store {
			url, schema := dbtest.NewSchema(t)
			st, err := pgstore.Open(context.Background(), url, &pgstore.Config{Schema: schema})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		},
	}
	for name, open := range opens {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cl, lf := lostFinishClient(t, open(t))
			ctx := context.Background()
			for _, c := range []struct {
				req   *idemclient.FailRequest
				state string
			}{
				{&idemclient.FailRequest{Error: "boom", ErrorCode: "E_TIMEOUT"}, "retryable"},
				{&idemclient.FailRequest{Error: "fatal", NoRetry: true}, "dead"},
			} {
				if _, err := cl.Enqueue(ctx, &idemclient.EnqueueRequest{Kind: "k", Queue: "q", MaxAttempts: 3}); err != nil {
					t.Fatal(err)
				}
				jobs, err := cl.Claim(ctx, &idemclient.ClaimRequest{Queues: []string{"q"}, WorkerID: "w"})
				if err != nil || len(jobs) != 1 {
					t.Fatalf("claim %v %v", jobs, err)
				}
				lf.armed.Store(true)
				j, err := cl.Fail(ctx, jobs[0].ID, jobs[0].LeaseToken, c.req)
				if err != nil || j.State != c.state || j.LastError != c.req.Error {
					t.Fatalf("fail (%s) with its first answer lost: %+v %v, want the job %s", c.req.Error, j, err, c.state)
				}
				if lf.armed.Load() {
					t.Fatal("no finish's answer was lost")
				}
				atts, err := cl.Attempts(ctx, j.ID)
				if err != nil || len(atts) != 1 {
					t.Fatalf("attempts %v %v, want the one failure", atts, err)
				}
			}
		})
	}
}
