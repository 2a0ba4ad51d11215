package cli

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/internal/dbtest"
)

// settledRe matches a PostgreSQL line of 300 waiting and 250 finished jobs
// whose settle step enqueued whole batches (1,000 or 2,000 jobs).
var settledRe = regexp.MustCompile(`\| 300 \| 250 \| [0-9.]+ \| [12],000 \([0-9,]+\) \|`)

// sqliteRe matches a SQLite line of 300 waiting and 250 finished jobs: no
// settle step.
var sqliteRe = regexp.MustCompile(`\| 300 \| 250 \| [0-9.]+ \| n/a \|`)

// workRe matches the work phase's columns at the end of a line: jobs/s,
// machine CPU per job, and the VACUUMs of jobs (a count on PostgreSQL,
// n/a on SQLite).
var workRe = regexp.MustCompile(`(?m)\| 300 \| 250 \| .* \| [1-9][0-9,]* \| [1-9][0-9]* \| ([0-9]+|n/a) \|$`)

// TestBenchGrowth: on both stores, the pre-fill copies the template jobs
// and the run prints one line per size; on PostgreSQL the claim's plan
// (the store's own statement, EXPLAINed) follows.
func TestBenchGrowth(t *testing.T) {
	t.Parallel()
	args := []string{"bench-growth", "--waiting", "0,300", "--finished", "250", "--scheduled", "120", "--enqueue", "200", "--singles", "40", "--claims", "3", "--claim-n", "50", "--work", "400", "--workers", "8", "--timeout", "2m"}
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		out, errs, code := run(t, args...)
		if code != 0 || !strings.Contains(out, "| 300 | 250 | ") || !sqliteRe.MatchString(out) || !strings.Contains(out, "scheduled=120") ||
			!strings.HasSuffix(workRe.FindString(out), " n/a |") {
			t.Fatalf("bench-growth: %d %q %q", code, out, errs)
		}
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		url := dbtest.PostgresURL(t)
		out, errs, code := run(t, append(args, "--database", url)...)
		if m := workRe.FindStringSubmatch(out); code != 0 || m == nil || m[1] == "n/a" {
			t.Fatalf("bench-growth: no work phase with a count of VACUUMs: %d %q %q", code, out, errs)
		}
		// The settle step used up the room the bulk copy left on the
		// history's pages: at least one batch of 1,000, and it stopped.
		if code != 0 || !settledRe.MatchString(out) || !strings.Contains(out, "claim plan, 300 waiting") ||
			!strings.Contains(out, "Buffers: shared") || !strings.Contains(out, "jobs_claim_tenant_idx") {
			t.Fatalf("bench-growth: %d %q %q", code, out, errs)
		}
	})
}

// TestSettle: settle goes on until a batch lands wholly on new pages and
// uses up the room it finds: a few rows on the last page of a history
// without holes, every hole of one whose pages have room (half of 400 keyed
// jobs deleted and vacuumed away).
func TestSettle(t *testing.T) {
	t.Parallel()
	for _, holes := range []bool{false, true} {
		t.Run(fmt.Sprintf("holes=%v", holes), func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			// A database of its own: VACUUM below must remove the deleted
			// rows, which a snapshot of a test running beside it in the
			// shared database would keep.
			base := dbtest.NewDatabase(t, "")
			schema := "settle"
			db, url, err := openBenchDB(ctx, base, schema, false)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.close(context.WithoutCancel(ctx), url) })
			c, err := idem.NewClient(db.st, &idem.Config{DisableMaintenance: true, Logger: discardLogger()})
			if err != nil {
				t.Fatal(err)
			}
			items := make([]idem.EnqueueParams, 400)
			for i := range items {
				items[i] = idem.EnqueueParams{Kind: "noop", Opts: &idem.EnqueueOpts{Queue: "history", IdempotencyKey: fmt.Sprintf("history-%d", i)}}
			}
			if _, err := c.EnqueueMany(ctx, items); err != nil {
				t.Fatal(err)
			}
			conn, err := pgx.Connect(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(context.WithoutCancel(ctx))
			jobs, records := pgx.Identifier{schema, "jobs"}.Sanitize(), pgx.Identifier{schema, "records"}.Sanitize()
			if holes {
				for _, q := range []string{"DELETE FROM " + jobs + " WHERE id % 2 = 0", "DELETE FROM " + records + " WHERE job_id % 2 = 0"} {
					if _, err := conn.Exec(ctx, q); err != nil {
						t.Fatal(err)
					}
				}
			}
			for _, tb := range []string{jobs, records} {
				if _, err := conn.Exec(ctx, "VACUUM "+tb); err != nil {
					t.Fatal(err)
				}
			}
			var pages int64
			if err := conn.QueryRow(ctx, "SELECT pg_relation_size('"+jobs+"') / current_setting('block_size')::int").Scan(&pages); err != nil {
				t.Fatal(err)
			}
			n, _, err := settle(ctx, db, url, c)
			if err != nil {
				t.Fatal(err)
			}
			var reused int
			if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+jobs+" WHERE queue = 'settle' AND (ctid::text::point)[0] < $1",
				pages).Scan(&reused); err != nil {
				t.Fatal(err)
			}
			// Whatever the history, its last page was not full: the first
			// batch always puts a few rows there, and the second lands on
			// new pages.
			switch {
			case !holes && (n != 2*idem.MaxBatch || reused >= 50):
				t.Fatalf("room on the last page only: %d jobs settled, %d on old pages; want two batches, a few", n, reused)
			case holes && (n < 2*idem.MaxBatch || reused < 100):
				t.Fatalf("room for 200 jobs: %d jobs settled, %d on old pages; want two batches or more, 100 or more", n, reused)
			}
		})
	}
}
