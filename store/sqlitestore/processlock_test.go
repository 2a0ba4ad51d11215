package sqlitestore

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/idem-dev/idem/store"
)

// TestRestartTakesLeadershipAtOnce: after the process holding leadership
// ends, a new Store on the same file (no other Store has it open) leads at
// once instead of waiting out the old term; while the old Store is open,
// its lease is respected.
func TestRestartTakesLeadershipAtOnce(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "idem.db")
	attempt := func(s *Store, owner string) bool {
		t.Helper()
		ok, err := s.LeaderAttempt(t.Context(), &store.LeaderParams{Name: "maintenance", Owner: owner, TTL: time.Hour, Now: t0})
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	old, err := Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !attempt(old, "old-process") {
		t.Fatal("the first process did not lead")
	}
	second, err := Open(t.Context(), path, nil) // the old one still has the file
	if err != nil {
		t.Fatal(err)
	}
	if attempt(second, "second-process") {
		t.Fatal("a second Store took a live lease")
	}
	second.Close()
	old.Close() // the old process ends without resigning (as in a crash)

	restarted, err := Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer restarted.Close()
	if !attempt(restarted, "new-process") {
		t.Fatal("the restarted process waits out the term of a process that is gone")
	}
}
