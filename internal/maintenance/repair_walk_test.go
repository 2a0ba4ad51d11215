package maintenance_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/internal/maintenance"
	"github.com/idem-dev/idem/internal/sqlitetest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/pgstore"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// TestRescuerRepairWalkEndsUnderSteadyInflow: the rescuer's walk of the
// pending jobs ends, and starts again from the oldest, even while new
// pending jobs keep coming faster than a run examines (Batch a run): a job
// the walk passed while it legitimately waited, and whose release was
// missed afterwards, is repaired by the next walk. A walk that took in the
// jobs created since it started never ended under such an inflow, so it
// never came back to the jobs behind its cursor. Counted in runs, not time.
func TestRescuerRepairWalkEndsUnderSteadyInflow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		open func(t *testing.T) (store.Store, func(id int64))
	}{
		{"sqlite", openSQLiteRaw},
		{"postgres", openPostgresRaw},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, missRelease := tc.open(t)
			testRepairWalkEnds(t, st, missRelease)
		})
	}
}

func testRepairWalkEnds(t *testing.T, st store.Store, missRelease func(id int64)) {
	ctx := context.Background()
	// a is the dependency whose release is missed; long runs throughout
	// and every other pending job waits for it.
	js := insert(t, st, base, 2, "")
	a, long := js[0], js[1]
	if jobs, err := st.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, WorkerID: "w", Limit: 2,
		LeaseUntil: base.Add(24 * time.Hour), Now: base}); err != nil || len(jobs) != 2 {
		t.Fatalf("claim: %d, %v", len(jobs), err)
	}
	pending := func(now time.Time, n int, dep int64) []int64 {
		var ps []*store.JobInsertParams
		for range n {
			ps = append(ps, &store.JobInsertParams{Tenant: "t", Queue: "d", Kind: "after", Args: []byte("{}"),
				MaxAttempts: 1, RunAt: now, DependsOn: []int64{dep}})
		}
		res, err := st.JobInsertMany(ctx, &store.JobInsertManyParams{Now: now, Jobs: ps})
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, r := range res {
			if r.Err != nil || r.Job.State != idemtype.StatePending {
				t.Fatalf("insert of a dependant: %v %+v", r.Err, r.Job)
			}
			ids = append(ids, r.Job.ID)
		}
		return ids
	}
	stuck := pending(base, 1, a.ID)[0]
	pending(base, 2, long.ID)
	const batch = 2
	var clk clock
	r := maintenance.NewRescuer(st, &maintenance.Config{Now: clk.Now, Batch: batch, RepairGrace: time.Second})
	now := base.Add(10 * time.Second)
	clk.Set(now)
	if _, err := r.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	wantJobState(t, st, stuck, idemtype.StatePending) // its dependency runs
	missRelease(a.ID)
	// Every run, as many new pending jobs as a run examines.
	const runs = 10
	for i := range runs {
		pending(now, batch, long.ID)
		now = now.Add(10 * time.Second)
		clk.Set(now)
		if _, err := r.RunOnce(ctx); err != nil {
			t.Fatalf("run %d: %v", i+2, err)
		}
		j, err := st.JobGet(ctx, &store.JobGetParams{ID: stuck})
		if err != nil {
			t.Fatal(err)
		}
		if j.State == idemtype.StateAvailable {
			return
		}
	}
	t.Fatalf("job %d, whose dependency completed without its release, still pending after %d runs: the walk never came back to it",
		stuck, runs+1)
}

// openSQLiteRaw opens a SQLite store and returns with it a func that
// completes a job without releasing its dependants (a missed release),
// through another connection to the file.
func openSQLiteRaw(t *testing.T) (store.Store, func(id int64)) {
	path := sqlitetest.Path(t)
	st, err := sqlitestore.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	return st, func(id int64) {
		if _, err := raw.Exec(`UPDATE jobs SET state = 'completed', finished_at = ?, lease_expires_at = NULL WHERE id = ?`,
			base.Add(time.Second).UnixMicro(), id); err != nil {
			t.Fatal(err)
		}
	}
}

// openPostgresRaw is openSQLiteRaw on PostgreSQL (a schema of its own).
func openPostgresRaw(t *testing.T) (store.Store, func(id int64)) {
	ctx := context.Background()
	url, schema := dbtest.NewSchema(t)
	st, err := pgstore.Open(ctx, url, &pgstore.Config{Schema: schema, CallerClock: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return st, func(id int64) {
		q := fmt.Sprintf(`UPDATE %s.jobs SET state = 'completed', finished_at = $1, lease_expires_at = NULL WHERE id = $2`,
			pgx.Identifier{schema}.Sanitize())
		if _, err := conn.Exec(ctx, q, base.Add(time.Second), id); err != nil {
			t.Fatal(err)
		}
	}
}
