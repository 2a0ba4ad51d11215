package sqlitestore

import (
	"context"
	"testing"

	"github.com/idem-dev/idem/store/storetest"
)

// TestMigrateCompletionDurations: a file before migration 0014 kept a
// completed job's duration in its completion's attempt row only; 0014
// gives the job row that duration (a record derived from the job takes
// it), not 0.
func TestMigrateCompletionDurations(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	ctx := context.Background()
	storetest.SeedEveryTable(t, s)
	durations := func() string {
		t.Helper()
		var d string
		if err := s.readRow(ctx, `SELECT coalesce(group_concat(id || ':' || duration_ms, ','), '')
            FROM (SELECT id, duration_ms FROM jobs WHERE state = 'completed' ORDER BY id)`).Scan(&d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	want := durations()
	if want == "" || want[len(want)-2:] == ":0" {
		t.Fatalf("the seed's completed jobs and their durations: %q, want one with a duration", want)
	}
	// The file as 0013 left it: the completion an attempt row, the job
	// row without duration_ms.
	err := s.write(ctx, 1, func(w *wtx) error {
		for _, q := range []string{
			`INSERT INTO attempts (job_id, attempt, started_at, finished_at, duration_ms, outcome, error, worker_id)
    SELECT id, attempt, started_at, finished_at, duration_ms, 'completed', '', worker_id FROM jobs WHERE state = 'completed'`,
			`ALTER TABLE jobs DROP COLUMN duration_ms`,
			`DELETE FROM schema_migrations WHERE version = 14`,
		} {
			if _, err := w.exec(q); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if got := durations(); got != want {
		t.Fatalf("the completed jobs' durations after 0014: %q, want %q", got, want)
	}
}
