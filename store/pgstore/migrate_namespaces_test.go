package pgstore

import (
	"context"
	"slices"
	"testing"
)

// TestMigrateRecordNamespaces: records an earlier version wrote without a
// job move to the namespace of their purpose (0005, up); job records keep
// their keys; down drops the moved records. Later migrations come after
// it, so every one above 0004 is stepped over.
func TestMigrateRecordNamespaces(t *testing.T) {
	t.Parallel()
	s, _ := newOwnDatabaseStore(t, 2, true)
	ctx := context.Background()
	if err := s.MigrateDown(ctx, stepsAbove(t, 4)); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		key   string
		jobID any
	}{{"http:K", nil}, {"d1", nil}, {"http:J", int64(7)}, {"j1", int64(8)}} {
		if _, err := s.pool.Exec(ctx, s.sql(`INSERT INTO {schema}.records (tenant, key, status, job_id, created_at)
VALUES ('default', $1, 'completed', $2, now())`), r.key, r.jobID); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	keys := func() []string {
		rows, err := s.pool.Query(ctx, s.sql(`SELECT key FROM {schema}.records ORDER BY key COLLATE "C"`))
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				t.Fatal(err)
			}
			out = append(out, k)
		}
		return out
	}
	if got, want := keys(), []string{"\x1fdo\x1fd1", "\x1fhttp\x1fhttp:K", "http:J", "j1"}; !slices.Equal(got, want) {
		t.Fatalf("keys after up %q, want %q", got, want)
	}
	if err := s.MigrateDown(ctx, stepsAbove(t, 4)); err != nil {
		t.Fatal(err)
	}
	if got, want := keys(), []string{"http:J", "j1"}; !slices.Equal(got, want) {
		t.Fatalf("keys after down %q, want %q", got, want)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
}

// stepsAbove is the number of migrations after version v.
func stepsAbove(t *testing.T, v int) int {
	t.Helper()
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range ms {
		if m.Version > v {
			n++
		}
	}
	return n
}
