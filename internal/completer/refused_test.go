package completer_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/completer"
	"github.com/idem-dev/idem/store"
)

// refusingStore wraps the real store and fails a whole call, as PostgreSQL
// fails a statement over data it cannot hold, whenever the call holds a
// finish with the result "poison" (which the real store would take).
type refusingStore struct {
	store.Store
	calls atomic.Int32
}

func (s *refusingStore) JobFinishMany(ctx context.Context, p []*store.JobFinishParams) ([]error, error) {
	s.calls.Add(1)
	for _, f := range p {
		if string(f.Result) == `"poison"` {
			return nil, fmt.Errorf("finish jobs: %w", idemtype.Invalid("result", "refused by the database (injected)"))
		}
	}
	return s.Store.JobFinishMany(ctx, p)
}

// wantRefused checks that job id ended dead with the completer's refusal
// error naming why, on the job and on its attempt.
func wantRefused(t *testing.T, st store.Store, id int64, why string) {
	t.Helper()
	ctx := context.Background()
	row, err := st.JobGet(ctx, &store.JobGetParams{Tenant: "t", ID: id})
	if err != nil {
		t.Fatal(err)
	}
	if row.State != idemtype.StateDead || !strings.HasPrefix(row.LastError, completer.RefusedError) ||
		!strings.Contains(row.LastError, why) {
		t.Fatalf("refused job %d: state %s, last error %q; want dead with %q…%q", id, row.State, row.LastError,
			completer.RefusedError, why)
	}
	as, err := st.AttemptList(ctx, &store.AttemptListParams{Tenant: "t", JobID: id})
	if err != nil || len(as) != 1 || as[0].Outcome != idemtype.OutcomeDead || as[0].Error != row.LastError {
		t.Fatalf("attempts of the refused job: %v %+v", err, as)
	}
}

func wantCompleted(t *testing.T, st store.Store, fins []*store.JobFinishParams, skip int64) {
	t.Helper()
	for _, f := range fins {
		if f.ID == skip {
			continue
		}
		row, err := st.JobGet(context.Background(), &store.JobGetParams{Tenant: "t", ID: f.ID})
		if err != nil || row.State != idemtype.StateCompleted {
			t.Fatalf("job %d: %v %v, want completed", f.ID, row, err)
		}
	}
}

func TestCompleterRefusedFinish(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("a finish the store refuses ends its job dead, the others complete", func(t *testing.T) {
		t.Parallel()
		st := openStore(t)
		var mu sync.Mutex
		reported := map[int64]bool{}
		c := completer.New(st, &completer.Config{Finished: func(ids []int64) {
			mu.Lock()
			defer mu.Unlock()
			for _, id := range ids {
				reported[id] = true
			}
		}})
		_ = c.Start(ctx)
		fins := claimed(t, st, 20)
		bad := fins[7]
		bad.Result = []byte("\"caf\xe9\"") // store.FinishCheck refuses it
		for _, f := range fins {
			c.Submit(f)
		}
		c.Stop()
		wantCompleted(t, st, fins, bad.ID)
		wantRefused(t, st, bad.ID, "UTF-8")
		mu.Lock()
		defer mu.Unlock()
		if len(reported) != len(fins) {
			t.Fatalf("reported %d finished jobs, want %d (the refused one too)", len(reported), len(fins))
		}
	})

	t.Run("a batch the store fails over one finish's data is split", func(t *testing.T) {
		t.Parallel()
		rs := &refusingStore{Store: openStore(t)}
		c := completer.New(rs, nil)
		_ = c.Start(ctx)
		fins := claimed(t, rs.Store, 64)
		bad := fins[41]
		bad.Result = []byte(`"poison"`)
		for _, f := range fins {
			c.Submit(f)
		}
		c.Stop()
		wantCompleted(t, rs.Store, fins, bad.ID)
		wantRefused(t, rs.Store, bad.ID, "injected")
	})

	t.Run("written is told what was written, and only that", func(t *testing.T) {
		t.Parallel()
		st := openStore(t)
		c := completer.New(st, nil)
		_ = c.Start(ctx)
		fins := claimed(t, st, 3)
		bad, lost := fins[0], fins[1]
		bad.Result = []byte("\"caf\xe9\"")
		lost.LeaseToken = "not-its-token" // refused: the lease is not this token's
		var mu sync.Mutex
		written := map[int64]idemtype.Outcome{}
		for _, f := range fins {
			c.SubmitThen(f, func() {
				mu.Lock()
				defer mu.Unlock()
				written[f.ID] = f.Outcome
			}, nil)
		}
		c.Stop()
		mu.Lock()
		defer mu.Unlock()
		want := map[int64]idemtype.Outcome{bad.ID: idemtype.OutcomeDead, fins[2].ID: idemtype.OutcomeCompleted}
		if len(written) != len(want) || written[bad.ID] != want[bad.ID] || written[fins[2].ID] != want[fins[2].ID] {
			t.Fatalf("written told %v, want %v (the refused finish as the dead one written, the lost lease's not at all)", written, want)
		}
	})
}
