package idem_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/pgstore"
)

// TestGoAPIPullClaimLeaseTimes: the lease end a pull claim hands out is
// the one the store keeps (microseconds), on the two paths where the claim
// rewrites the lease after JobClaim, on both stores, and on PostgreSQL
// with its default expiry clock (the database's, no CallerClock) too. The
// caller's clock runs a second behind the database's, with nanoseconds no
// truncation hides by chance. The paths:
//   - a job whose timeout is shorter than the lease: the claim caps its
//     lease at the deadline (StartedAt + timeout), which it reports.
//     Before the fix PostgreSQL's own clock kept its now plus the
//     deadline's distance from the caller's now, later than the deadline
//     by the caller clock's lag and the time between the claim and that
//     write;
//   - a keyed job whose key the claim itself did not hold: the claim
//     re-checks its lease after the key step (dropVoided) with a renewal,
//     which on the database's clock stores another end than the claim's.
//     Before the fix the claim handed out the claim's end.
func TestGoAPIPullClaimLeaseTimes(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"sqlite", "postgres", "postgres-database-clock"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			var st store.Store
			if kind == "postgres-database-clock" {
				st = openDatabaseClockStore(t)
			} else {
				st, _ = openLeaseStore(t, kind)
			}
			checkPullClaimLeaseTimes(t, st)
		})
	}
}

// openDatabaseClockStore opens a PostgreSQL store on a fresh schema with
// its default expiry clock, the database's.
func openDatabaseClockStore(t *testing.T) store.Store {
	t.Helper()
	ctx := context.Background()
	url, schema := dbtest.NewSchema(t)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatalf("pool: %v", err)
	}
	t.Cleanup(pool.Close)
	st, err := pgstore.New(ctx, pool, &pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatalf("open pg: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// checkPullClaimLeaseTimes runs TestGoAPIPullClaimLeaseTimes's claims on
// st.
func checkPullClaimLeaseTimes(t *testing.T, st store.Store) {
	ctx := context.Background()
	const timeout = 5 * time.Second
	now := func() time.Time {
		return time.Now().Add(-time.Second).Truncate(time.Microsecond).Add(123 * time.Nanosecond)
	}
	c, err := idem.NewClient(st, &idem.Config{Logger: quietLogger(), DisableMaintenance: true,
		TimeoutByKind: map[string]time.Duration{"timed": timeout}, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	claim1 := func(t *testing.T, queue string) (*idem.JobRow, *idem.JobRow) {
		t.Helper()
		jobs, err := c.Claim(ctx, idem.ClaimParams{Queues: []string{queue}, WorkerID: "w", Lease: time.Minute})
		if err != nil || len(jobs) != 1 {
			t.Fatalf("claim of %s: %v %v", queue, jobs, err)
		}
		row, err := c.JobGet(ctx, "", jobs[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if row.LeaseExpiresAt == nil || !jobs[0].LeaseExpiresAt.Equal(*row.LeaseExpiresAt) {
			t.Errorf("claim of %s returned the lease end %v, the store keeps %v", queue, jobs[0].LeaseExpiresAt, row.LeaseExpiresAt)
		}
		return jobs[0], row
	}

	t.Run("capped at the timeout", func(t *testing.T) {
		if _, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "timed", Opts: &idem.EnqueueOpts{Queue: "timed"}}); err != nil {
			t.Fatal(err)
		}
		j, row := claim1(t, "timed")
		if row.StartedAt == nil {
			t.Fatal("claimed job without StartedAt")
		}
		if deadline := row.StartedAt.Add(timeout); !j.LeaseExpiresAt.Equal(deadline) || !row.LeaseExpiresAt.Equal(deadline) {
			t.Errorf("lease end returned %v, stored %v; want the deadline %v (StartedAt + timeout)",
				j.LeaseExpiresAt, row.LeaseExpiresAt, deadline)
		}
	})
	t.Run("keyed, re-checked after the key step", func(t *testing.T) {
		if _, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "keyed",
			Opts: &idem.EnqueueOpts{Queue: "keyed", IdempotencyKey: "lk"}}); err != nil {
			t.Fatal(err)
		}
		// Without its record the claim does not hold the job's key: its
		// key step takes it (KeyHeld false).
		if err := c.RecordDelete(ctx, "", "lk"); err != nil {
			t.Fatal(err)
		}
		if j, _ := claim1(t, "keyed"); j.KeyHeld {
			t.Error("the claim held the key of a job without a record: the path is not the one tested")
		}
	})
}

// TestHeartbeatCapMatchesClaimCap: a pull claim caps a timed job's lease
// at the deadline itself (capLeases, Absolute), and so does a later
// Heartbeat capped at the same deadline. Before the fix the heartbeat
// stored it relative to the caller's now: on PostgreSQL's own clock with a
// caller clock a second behind the database's, the lease outlived the
// deadline the claim stored by that second (found by review).
func TestHeartbeatCapMatchesClaimCap(t *testing.T) {
	t.Parallel()
	st := openDatabaseClockStore(t)
	ctx := context.Background()
	const timeout = 5 * time.Second
	c, err := idem.NewClient(st, &idem.Config{Logger: quietLogger(), DisableMaintenance: true,
		TimeoutByKind: map[string]time.Duration{"timed": timeout},
		Now:           func() time.Time { return time.Now().Add(-time.Second) }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "timed", Opts: &idem.EnqueueOpts{Queue: "timed"}}); err != nil {
		t.Fatal(err)
	}
	jobs, err := c.Claim(ctx, idem.ClaimParams{Queues: []string{"timed"}, WorkerID: "w", Lease: time.Minute})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %v %v", jobs, err)
	}
	j := jobs[0]
	claimEnd := *j.LeaseExpiresAt
	until, err := c.Heartbeat(ctx, "", j.ID, j.LeaseToken, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("claim capped the lease at %v; heartbeat (capped at the same deadline) stored %v (+%v)", claimEnd, until, until.Sub(claimEnd))
	if !until.Equal(claimEnd) || !until.Equal(j.StartedAt.Add(timeout).Truncate(time.Microsecond)) {
		t.Errorf("heartbeat capped at the timeout stored %v, the claim %v (the deadline)", until, claimEnd)
	}
	row, err := c.JobGet(ctx, "", j.ID)
	if err != nil || row.LeaseExpiresAt == nil || !row.LeaseExpiresAt.Equal(until) {
		t.Errorf("stored lease end %v (%v), heartbeat returned %v", row.LeaseExpiresAt, err, until)
	}
}
