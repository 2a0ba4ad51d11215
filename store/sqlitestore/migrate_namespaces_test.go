package sqlitestore

import (
	"context"
	"testing"
)

// TestMigrateRecordNamespaces: records an earlier version wrote without a
// job move to the namespace of their purpose (0006); job records keep
// their keys.
func TestMigrateRecordNamespaces(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	ctx := context.Background()
	err := s.write(ctx, 1, func(w *wtx) error {
		for _, r := range []struct {
			key   string
			jobID int64
		}{{"http:K", 0}, {"d1", 0}, {"http:J", 7}, {"j1", 8}} {
			if _, err := w.exec(`INSERT INTO idem_keys (tenant, key, status, job_id, created_at)
VALUES ('default', ?, 'completed', ?, 0)`, r.key, r.jobID); err != nil {
				return err
			}
		}
		_, err := w.exec(`DELETE FROM schema_migrations WHERE version = 6`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT key FROM idem_keys ORDER BY job_id, key`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		got = append(got, k)
	}
	want := []string{"\x1fdo\x1fd1", "\x1fhttp\x1fhttp:K", "http:J", "j1"}
	if len(got) != len(want) {
		t.Fatalf("keys %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("keys %q, want %q", got, want)
		}
	}
}
