package idemclient_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemclient"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/sqlitetest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// contendedSchedules is a real store whose first reads of a schedule are
// each followed by a put of it with new args by another client: a
// schedule replaced again and again while a trigger reads it, until
// contended reads have been made (-1: for ever).
type contendedSchedules struct {
	store.Store
	other     *idem.Client
	contended atomic.Int64
	n         atomic.Int64
	t         *testing.T
}

func (s *contendedSchedules) ScheduleGet(ctx context.Context, p *store.ScheduleGetParams) (*store.Schedule, error) {
	sc, err := s.Store.ScheduleGet(ctx, p)
	if err == nil && (s.contended.Load() < 0 || s.contended.Add(-1) >= 0) {
		v := s.n.Add(1)
		if _, perr := s.other.SchedulePut(ctx, &idem.Schedule{Name: p.Name, Every: 10 * time.Minute, Kind: "tick",
			Args: fmt.Appendf(nil, `{"v":%d}`, v)}); perr != nil {
			s.t.Error(perr)
		}
	}
	return sc, err
}

// countTriggers counts the trigger requests that reach the server.
type countTriggers struct {
	mu    sync.Mutex
	calls int
}

func (c *countTriggers) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/schedules/tick/trigger" {
			c.mu.Lock()
			c.calls++
			c.mu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}

func (c *countTriggers) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// TestTriggerRetriesConflict: TriggerSchedule retries a 409
// /problems/conflict (the schedule replaced after each of the server's
// reads: nothing fired, ErrConflict), with its backoff and the same
// Idempotency-Key, and the retry runs the trigger again (the server
// stores no answer of a conflict to replay): one job is made. When the
// retries run out, the error is errors.Is ErrConflict and no job is made.
// The client did not retry the conflict at all, and the server stored its
// 409 under the key, so a retry would have got it replayed.
func TestTriggerRetriesConflict(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	raw, err := sqlitestore.Open(ctx, sqlitetest.Path(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	other, err := idem.NewClient(raw, &idem.Config{DisableMaintenance: true, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	st := &contendedSchedules{Store: raw, other: other, t: t}
	engine, err := idem.NewClient(st, &idem.Config{DisableMaintenance: true, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := idemhttp.NewServer(engine, st, &idemhttp.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	calls := &countTriggers{}
	hs := httptest.NewServer(calls.wrap(srv))
	t.Cleanup(hs.Close)
	secret, k := idemhttp.NewAPIKey("default", true, "t", time.Now())
	if err := raw.APIKeyCreate(ctx, k); err != nil {
		t.Fatal(err)
	}
	// MaxBackoff caps the conflict's Retry-After (1 s).
	cl, err := idemclient.New(hs.URL, &idemclient.Config{APIKey: secret, MaxRetries: 3, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.SchedulePut(ctx, &idem.Schedule{Name: "tick", Every: 10 * time.Minute, Kind: "tick", Args: []byte(`{"v":0}`)}); err != nil {
		t.Fatal(err)
	}
	jobs := func() int {
		t.Helper()
		page, err := cl.ListJobs(ctx, &idemclient.ListParams{})
		if err != nil {
			t.Fatal(err)
		}
		return len(page.Jobs)
	}

	// Every read of the first two attempts is contended: the third fires.
	st.contended.Store(20)
	res, err := cl.TriggerSchedule(ctx, "tick", "")
	if err != nil || res.Job == nil {
		t.Fatalf("trigger contended for two attempts: %+v, %v; want the job of the third", res, err)
	}
	if got := calls.count(); got != 3 {
		t.Errorf("trigger contended for two attempts: %d requests, want 3", got)
	}
	if n := jobs(); n != 1 {
		t.Errorf("jobs after a trigger retried past two conflicts: %d, want 1", n)
	}

	// Contended for ever: the retries run out on ErrConflict.
	st.contended.Store(-1)
	before := calls.count()
	res, err = cl.TriggerSchedule(ctx, "tick", "")
	var pe *idemclient.Error
	if !errors.Is(err, idemtype.ErrConflict) || !errors.Is(err, idem.ErrConflict) || !errors.As(err, &pe) || pe.Status != http.StatusConflict {
		t.Fatalf("trigger contended for ever: %+v, %v; want a 409 that is ErrConflict", res, err)
	}
	if got := calls.count() - before; got != 4 {
		t.Errorf("trigger contended for ever: %d requests, want 4 (MaxRetries 3)", got)
	}
	if n := jobs(); n != 1 {
		t.Errorf("jobs after a trigger that ran out of retries: %d, want still 1", n)
	}
}
