package idem_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/pgstore"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// failingStore is a store whose database refuses, by a trigger, to insert
// a job that matches a condition on its kind and queue (as a database that
// is lost mid-write would fail the statement), until heal drops the
// trigger.
type failingStore struct {
	name string
	open func(t *testing.T) (st store.Store, heal func())
}

// failingStores returns a failingStore of each backend whose trigger
// refuses the jobs for which when (an SQL condition on NEW.kind and
// NEW.queue, the same in both dialects) holds.
func failingStores(when string) []failingStore {
	return []failingStore{
		{"sqlite", func(t *testing.T) (store.Store, func()) {
			path := filepath.Join(t.TempDir(), "idem.db")
			st, err := sqlitestore.Open(context.Background(), path, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			db, err := sql.Open("sqlite", "file:"+path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			if _, err := db.Exec(`CREATE TRIGGER boom BEFORE INSERT ON jobs
WHEN ` + when + ` BEGIN SELECT RAISE(ABORT, 'boom: the database failed'); END`); err != nil {
				t.Fatal(err)
			}
			return st, func() {
				if _, err := db.Exec(`DROP TRIGGER boom`); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"postgres", func(t *testing.T) (store.Store, func()) {
			url, schema := dbtest.NewSchema(t)
			pool, err := pgxpool.New(context.Background(), url)
			if err != nil {
				t.Fatal(err)
			}
			st, err := pgstore.New(context.Background(), pool, &pgstore.Config{Schema: schema})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close(); pool.Close() })
			ctx := context.Background()
			if _, err := pool.Exec(ctx, `CREATE FUNCTION "`+schema+`".boom() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'boom: the database failed'; END $$`); err != nil {
				t.Fatal(err)
			}
			if _, err := pool.Exec(ctx, `CREATE TRIGGER boom BEFORE INSERT ON "`+schema+`".jobs FOR EACH ROW
WHEN (`+when+`) EXECUTE FUNCTION "`+schema+`".boom()`); err != nil {
				t.Fatal(err)
			}
			return st, func() {
				if _, err := pool.Exec(ctx, `DROP TRIGGER boom ON "`+schema+`".jobs`); err != nil {
					t.Fatal(err)
				}
			}
		}},
	}
}

// TestJobReplayFailureCopiesNothing: a replay of more than one batch of
// jobs whose last copy the database refuses (a failure after the validation,
// as a lost database) fails and leaves no copy, with or without a key, so
// that its retry — here without a key, which cannot tell the copies already
// made — copies every job once. Before the fix the copies were written
// batch by batch: the first MaxBatch stayed committed behind the error and
// the retry copied them again.
func TestJobReplayFailureCopiesNothing(t *testing.T) {
	t.Parallel()
	for _, fs := range failingStores(`NEW.kind = 'boom' AND NEW.queue = 'copies'`) {
		t.Run(fs.name, func(t *testing.T) {
			t.Parallel()
			st, heal := fs.open(t)
			c, err := idem.NewClient(st, &idem.Config{Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			replayOriginals(t, c, idem.MaxBatch)
			// The newest original: the last of the oldest-first copies.
			r, err := c.EnqueueRaw(context.Background(), idem.EnqueueParams{Kind: "boom", Opts: &idem.EnqueueOpts{Queue: "q"}})
			if err != nil {
				t.Fatal(err)
			}
			cancelJob(t, c, r.Job.ID)
			const total = idem.MaxBatch + 1
			p := &idem.ReplayParams{Filter: idem.JobFilter{Queue: "q"}, Queue: "copies", Limit: 2000}
			n, err := c.JobReplay(context.Background(), p)
			if err == nil {
				t.Fatalf("replay through the failing database: %d copies and no error", n)
			}
			if got := countQueue(t, c, "copies"); got != 0 || n != 0 {
				t.Fatalf("a failed replay answered %d and left %d copies; want none (%v)", n, got, err)
			}
			heal()
			if n, err = c.JobReplay(context.Background(), p); err != nil || n != total {
				t.Fatalf("retry: %d, %v; want %d", n, err, total)
			}
			if got := countQueue(t, c, "copies"); got != total {
				t.Fatalf("after the retry: %d copies, want %d (no job copied twice)", got, total)
			}
		})
	}
}
