package sqlitestore

import (
	"context"
	"testing"
	"time"

	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/storetest"
)

// TestMigrateResultExpiryKeepsRecords: migration 0023 adds the result's
// own expiry without writing the records it finds (a completed record's
// result then expires with the record, as it did, and reads so), and the
// sweep's index (idem_keys_result_expires, read by qRecordDropResults)
// holds only the records that outlive their result: neither the migration
// nor a completion whose result expires with its record (window = result
// TTL, the defaults: every keyed completion on this store writes its
// record) adds an entry to it.
func TestMigrateResultExpiryKeepsRecords(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	ctx := context.Background()
	// The state before 0023: a completed record kept for two days.
	err := s.write(ctx, 1, func(w *wtx) error {
		for _, q := range []string{`DROP INDEX idem_keys_result_expires`, `ALTER TABLE idem_keys DROP COLUMN result_expires_at`,
			`DELETE FROM schema_migrations WHERE version = 23`} {
			if _, err := w.exec(q); err != nil {
				return err
			}
		}
		_, err := w.exec(`INSERT INTO idem_keys (tenant, key, status, result, result_hash, size_bytes, created_at,
    completed_at, dedup_until, expires_at) VALUES ('default', 'done', 'completed', '"R"', 'h', 3, ?1, ?1, ?2, ?3)`,
			toUS(t0), toUS(t0.Add(24*time.Hour)), toUS(t0.Add(48*time.Hour)))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	entries := func() int {
		var n int
		if err := s.rdb.QueryRowContext(ctx, `SELECT COALESCE(sum(ncell), 0) FROM dbstat WHERE name = 'idem_keys_result_expires'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := entries(); n != 0 {
		t.Errorf("idem_keys_result_expires holds %d entries after the migration, want none", n)
	}
	storetest.CheckCompletedBeforeResultExpiry(t, s, "done", t0.Add(36*time.Hour), `"R"`, t0.Add(48*time.Hour))

	for _, c := range []struct {
		key  string
		ttl  time.Duration
		want int
	}{{"same", 48 * time.Hour, 0}, {"short", time.Hour, 1}} {
		res, err := s.RecordAcquire(ctx, &store.RecordAcquireParams{Tenant: "default", Key: c.key, Owner: "do:a",
			LeaseUntil: t0.Add(time.Minute), DedupUntil: t0.Add(48 * time.Hour), ExpiresAt: t0.Add(48 * time.Hour), Now: t0})
		if err != nil || !res.Acquired {
			t.Fatalf("acquire %s: %+v, %v", c.key, res, err)
		}
		if err := s.RecordComplete(ctx, &store.RecordCompleteParams{Tenant: "default", Key: c.key, Owner: "do:a",
			Result: []byte(`"R"`), ResultHash: "h", TTL: c.ttl, Now: t0}); err != nil {
			t.Fatal(err)
		}
		if n := entries(); n != c.want {
			t.Errorf("idem_keys_result_expires holds %d entries after %s (result TTL %v, window 48h), want %d", n, c.key, c.ttl, c.want)
		}
	}
	if n, err := s.RecordDeleteExpired(ctx, &store.RecordDeleteExpiredParams{Now: t0.Add(2 * time.Hour), Limit: 10}); err != nil || n != 1 {
		t.Errorf("RecordDeleteExpired = %d, %v; want the short result dropped", n, err)
	}
}
