package leadership_test

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/idem-dev/idem/internal/leadership"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/sqlitestore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func openStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "l.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestElectorCampaignsAndResigns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	a := leadership.New(st, leadership.Config{Owner: "a", TTL: time.Hour})
	a.TestSignals.Attempted.Init()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	_ = a.Start(ctx) // no-op while campaigning
	if !a.TestSignals.Attempted.WaitOrTimeout(t) || !a.IsLeader() {
		t.Fatal("a lone elector does not lead")
	}
	a.Stop()
	a.Stop()
	if a.IsLeader() {
		t.Fatal("a leads after Stop")
	}
	b := leadership.New(st, leadership.Config{Owner: "b", TTL: time.Hour})
	if ok, err := b.RunOnce(ctx); !ok || err != nil {
		t.Fatalf("b cannot lead after a resigned: %v %v", ok, err)
	}
	leadership.New(st, leadership.Config{Owner: "c"}).Stop() // Stop without Start
}

func TestElectorTakesOverAfterResign(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	a := leadership.New(st, leadership.Config{Owner: "a", TTL: time.Hour})
	// b's term must outlast the check after its winning attempt: IsLeader
	// is false once the term of the last won attempt ran out.
	b := leadership.New(st, leadership.Config{Owner: "b", TTL: 1500 * time.Millisecond})
	a.TestSignals.Attempted.Init()
	b.TestSignals.Attempted.Init()
	_ = a.Start(ctx)
	if !a.TestSignals.Attempted.WaitOrTimeout(t) {
		t.Fatal("a does not lead")
	}
	_ = b.Start(ctx)
	defer b.Stop()
	if b.TestSignals.Attempted.WaitOrTimeout(t) {
		t.Fatal("b leads beside a")
	}
	a.Stop() // resigns: b leads at its next attempt, without waiting for a's hour
	for won := false; !won; {
		won = b.TestSignals.Attempted.WaitOrTimeout(t) // every TTL/3 = 500ms
	}
	if !b.IsLeader() {
		t.Fatal("b is not leader after winning")
	}
}

// cutOffLeader returns an elector that led on a SQLite store which is then
// closed: every later call to the store fails.
func cutOffLeader(t *testing.T, logger *slog.Logger) *leadership.Elector {
	t.Helper()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "l.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	a := leadership.New(st, leadership.Config{Owner: "a", TTL: time.Hour, Logger: logger})
	if ok, err := a.RunOnce(ctx); !ok || err != nil || !a.IsLeader() {
		t.Fatalf("a lone elector: %v %v", ok, err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return a
}

// TestElectorCutOffFromItsStore: a leader whose renewal fails (its store is
// gone) stops leading at once rather than at its TTL's end, so a node cut
// off from the database never acts as a second leader; stopped while cut
// off, it stops leading and says that its resignation failed (the lease
// then lapses at its TTL).
func TestElectorCutOffFromItsStore(t *testing.T) {
	t.Parallel()
	t.Run("renewal fails", func(t *testing.T) {
		t.Parallel()
		a := cutOffLeader(t, nil)
		ok, err := a.RunOnce(context.Background())
		if ok || err == nil || a.IsLeader() {
			t.Fatalf("renewal on a closed store: leader %v (IsLeader %v), err %v; want no leadership and the error", ok, a.IsLeader(), err)
		}
		a.Stop()
	})
	t.Run("resign fails", func(t *testing.T) {
		t.Parallel()
		var logged bytes.Buffer
		a := cutOffLeader(t, slog.New(slog.NewTextHandler(&logged, nil)))
		a.Stop()
		if a.IsLeader() || !strings.Contains(logged.String(), "leader resign failed") {
			t.Fatalf("leader %v after Stop; log:\n%s", a.IsLeader(), logged.String())
		}
	})
}
