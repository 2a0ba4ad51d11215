package idem_test

import (
	"context"
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

// TestGoAPILeaseTimesAreTheStoredOnes (both stores): the lease ends the Go
// API returns — a claim's, a heartbeat's, a result lease's acquire and
// renew, a result lease complete's StoredAt — are the times the store keeps (microseconds), so a caller
// comparing one with the same time read back later sees it equal. The
// clock has nanoseconds no truncation hides by chance. Before the fix
// Heartbeat and ResultLeaseRenew returned the computed time with its
// nanoseconds, and a complete's StoredAt another reading of the clock.
func TestGoAPILeaseTimesAreTheStoredOnes(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			st, _ := openLeaseStore(t, kind)
			now := func() time.Time { return time.Now().Truncate(time.Microsecond).Add(123 * time.Nanosecond) }
			c, err := idem.NewClient(st, &idem.Config{Logger: quietLogger(), DisableMaintenance: true, Now: now})
			if err != nil {
				t.Fatal(err)
			}
			checkLeaseTimesStored(t, c)
		})
	}
}

// TestGoAPILeaseTimesAreTheStoredOnesDatabaseClock: as
// TestGoAPILeaseTimesAreTheStoredOnes on PostgreSQL with its default
// expiry clock, the database's (no CallerClock): a heartbeat stores the
// database's now plus the lease's length, and a result lease's renewal the
// asked end shifted by how far the database's clock is ahead of the
// caller's, so the end computed by the caller is not the one stored.
// Heartbeat and ResultLeaseRenew return the stored end (a claim capped at
// its timeout reports the deadline itself: see capLeases).
func TestGoAPILeaseTimesAreTheStoredOnesDatabaseClock(t *testing.T) {
	t.Parallel()
	st := openDatabaseClockStore(t)
	// The caller's clock runs a second behind the database's: what the
	// caller computes is not what the database's clock stores.
	c, err := idem.NewClient(st, &idem.Config{Logger: quietLogger(), DisableMaintenance: true,
		Now: func() time.Time { return time.Now().Add(-time.Second) }})
	if err != nil {
		t.Fatal(err)
	}
	checkLeaseTimesStored(t, c)
}

// checkLeaseTimesStored claims a job of c, heartbeats it, acquires,
// renews and completes a result lease, and fails t for each time returned
// that is not the one the store then holds.
func checkLeaseTimesStored(t *testing.T, c *idem.Client) {
	t.Helper()
	ctx := context.Background()
	same := func(what string, got time.Time, stored *time.Time) {
		t.Helper()
		if stored == nil || !got.Equal(*stored) {
			t.Errorf("%s returned %v, the store keeps %v", what, got, stored)
		}
	}
	if _, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "k", Opts: &idem.EnqueueOpts{Queue: "q"}}); err != nil {
		t.Fatal(err)
	}
	jobs, err := c.Claim(ctx, idem.ClaimParams{Queues: []string{"q"}, WorkerID: "w", Lease: time.Minute})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %v %v", jobs, err)
	}
	j := jobs[0]
	row, err := c.JobGet(ctx, "", j.ID)
	if err != nil {
		t.Fatal(err)
	}
	same("Claim", *j.LeaseExpiresAt, row.LeaseExpiresAt)
	until, err := c.Heartbeat(ctx, "", j.ID, j.LeaseToken, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if row, err = c.JobGet(ctx, "", j.ID); err != nil {
		t.Fatal(err)
	}
	same("Heartbeat", until, row.LeaseExpiresAt)

	l, err := c.ResultLeaseAcquire(ctx, "rk", &idem.ResultLeaseOpts{Lease: time.Minute})
	if err != nil || l.Token == "" {
		t.Fatalf("acquire: %+v %v", l, err)
	}
	rec, err := c.DoRecordGet(ctx, "", "rk")
	if err != nil {
		t.Fatal(err)
	}
	same("ResultLeaseAcquire", l.Until, rec.LeaseUntil)
	if until, err = c.ResultLeaseRenew(ctx, "", "rk", l.Token, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if rec, err = c.DoRecordGet(ctx, "", "rk"); err != nil {
		t.Fatal(err)
	}
	same("ResultLeaseRenew", until, rec.LeaseUntil)

	done, err := c.ResultLeaseComplete(ctx, "", "rk", l.Token, []byte(`1`), 0, 0)
	if err != nil || done.StoredAt == nil {
		t.Fatalf("complete: %+v %v", done, err)
	}
	if rec, err = c.DoRecordGet(ctx, "", "rk"); err != nil {
		t.Fatal(err)
	}
	same("ResultLeaseComplete's StoredAt", *done.StoredAt, rec.CompletedAt)
}
