package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/storetest"
)

// resultTTLRecord stores the result "R" of Do key key under owner at at,
// kept for ttl in a record that lives until at + window.
func resultTTLRecord(t *testing.T, s *Store, key string, at time.Time, ttl, window time.Duration) {
	t.Helper()
	ctx := context.Background()
	res, err := s.RecordAcquire(ctx, &store.RecordAcquireParams{Tenant: "default", Key: key, Owner: "do:a",
		LeaseUntil: at.Add(time.Minute), DedupUntil: at.Add(window), ExpiresAt: at.Add(window), Now: at})
	if err != nil || !res.Acquired {
		t.Fatalf("acquire %s: %+v, %v", key, res, err)
	}
	if err := s.RecordComplete(ctx, &store.RecordCompleteParams{Tenant: "default", Key: key, Owner: "do:a",
		Result: []byte(`"R"`), ResultHash: "h", TTL: ttl, Now: at}); err != nil {
		t.Fatalf("complete %s: %v", key, err)
	}
}

// TestMigrateDownResultExpiryLeavesNoEmptyCompletion: after the expiry
// sweep dropped the bytes of a result that expired before its record
// (a result TTL shorter than the window), migration 0023's down step
// leaves no record completed without a result. The versions before it
// read a completed record as its result, whatever its bytes: a job of the
// key would complete from the cache with a null result, a Do call would
// return null and the HTTP middleware would answer a repeat 422. Such a
// record is left in progress with no lease and no result: the key still
// names its job and window, and its next run runs again.
func TestMigrateDownResultExpiryLeavesNoEmptyCompletion(t *testing.T) {
	t.Parallel()
	s, _ := newOwnDatabaseStore(t, 2, true)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	resultTTLRecord(t, s, "short", t0, time.Hour, 48*time.Hour)
	resultTTLRecord(t, s, "long", t0, 48*time.Hour, 48*time.Hour)
	if _, err := s.RecordDeleteExpired(ctx, &store.RecordDeleteExpiredParams{Now: t0.Add(2 * time.Hour), Limit: 100}); err != nil {
		t.Fatal(err)
	}
	if err := s.MigrateDown(ctx, stepsAbove(t, 22)); err != nil { // undo 0023 and every later one
		t.Fatal(err)
	}
	type row struct {
		status   string
		result   []byte
		owner    *string
		hash     string
		expires  time.Time
		complete *time.Time
	}
	read := func(key string) row {
		var r row
		if err := s.pool.QueryRow(ctx, s.sql(`SELECT status, result, lease_owner, result_hash, expires_at, completed_at
FROM {schema}.records WHERE key = $1`), key).Scan(&r.status, &r.result, &r.owner, &r.hash, &r.expires, &r.complete); err != nil {
			t.Fatalf("read %s: %v", key, err)
		}
		return r
	}
	if r := read("short"); r.status != "in_progress" || r.result != nil || r.owner != nil || r.hash != "" ||
		r.complete != nil || !r.expires.Equal(t0.Add(48*time.Hour)) {
		t.Errorf("record whose result the sweep dropped, after down: %+v, want in progress, no result, no lease, expiring with its window", r)
	}
	if r := read("long"); r.status != "completed" || string(r.result) != `"R"` {
		t.Errorf("record with a live result, after down: %+v, want it completed with its result", r)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := s.RecordAcquire(ctx, &store.RecordAcquireParams{Tenant: "default", Key: "short", Owner: "do:b",
		LeaseUntil: t0.Add(3 * time.Hour), Now: t0.Add(2 * time.Hour)})
	if err != nil || !got.Acquired || got.Record.Status != idemtype.RecordInProgress {
		t.Errorf("acquire after down and up: %+v, %v; want the key taken", got, err)
	}
}

// TestMigrateResultExpiryRewritesNoRecord: migration 0023 runs in the
// migration transaction under the ACCESS EXCLUSIVE lock its ALTER TABLE
// takes on records, which every keyed insert, claim, completion and Do of
// every node waits for. It adds the column without writing the records it
// finds (a completed record's result then expires with the record, as it
// did: its result_expires_at reads as its expiry), and its index holds
// only the records that outlive their result, so neither the migration
// nor a completion whose result expires with its record (window = result
// TTL, the defaults) writes an entry in it.
func TestMigrateResultExpiryRewritesNoRecord(t *testing.T) {
	t.Parallel()
	s, _ := newOwnDatabaseStore(t, 2, true)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := s.MigrateDown(ctx, stepsAbove(t, 22)); err != nil { // undo 0023 and every later one
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, s.sql(`INSERT INTO {schema}.records (tenant, key, status, result, result_hash, size_bytes,
    created_at, completed_at, dedup_until, expires_at)
VALUES ('default', 'done', 'completed', '"R"', 'h', 3, $1, $1, $1::timestamptz + interval '1 day', $1::timestamptz + interval '2 days'),
    ('default', 'open', 'in_progress', NULL, '', 0, $1, NULL, $1::timestamptz + interval '1 day', $1::timestamptz + interval '1 day')`), t0); err != nil {
		t.Fatal(err)
	}
	versions := func() map[string]string {
		rows, err := s.pool.Query(ctx, s.sql(`SELECT key, xmin::text FROM {schema}.records`))
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string]string{}
		for rows.Next() {
			var k, x string
			if err := rows.Scan(&k, &x); err != nil {
				t.Fatal(err)
			}
			out[k] = x
		}
		return out
	}
	before := versions()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if after := versions(); after["done"] != before["done"] || after["open"] != before["open"] {
		t.Errorf("record versions %v before the migration, %v after: it rewrote records", before, after)
	}
	indexPages := func() int64 {
		var n int64
		if err := s.pool.QueryRow(ctx, s.sql(`SELECT pg_relation_size('{schema}.records_result_expires_idx') / current_setting('block_size')::bigint`)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := indexPages(); n != 1 {
		t.Errorf("records_result_expires_idx has %d pages after the migration, want its metapage only", n)
	}

	// The completed record serves its result until its expiry, as before.
	now := t0.Add(36 * time.Hour)
	storetest.CheckCompletedBeforeResultExpiry(t, s, "done", now, `"R"`, t0.Add(48*time.Hour))
	if st, err := s.RecordStats(ctx, &store.RecordStatsParams{Tenant: "default", Now: now}); err != nil || st.Completed != 1 || st.SizeBytes != 3 || st.Expired != 1 {
		t.Errorf("RecordStats after the migration: %+v, %v; want 1 completed of 3 bytes and the open record expired", st, err)
	}
	if got, err := s.RecordAcquire(ctx, &store.RecordAcquireParams{Tenant: "default", Key: "done", Owner: "do:b",
		LeaseUntil: now.Add(time.Minute), Now: now}); err != nil || got.Acquired || string(got.Record.Result) != `"R"` {
		t.Errorf("acquire of the completed record within its expiry: %+v, %v; want its cached result", got, err)
	}

	// A result that expires with its record writes no index entry; one
	// that expires before it does.
	resultTTLRecord(t, s, "same", t0, 48*time.Hour, 48*time.Hour)
	if n := indexPages(); n != 1 {
		t.Errorf("records_result_expires_idx has %d pages after a completion whose result expires with its record, want 1", n)
	}
	resultTTLRecord(t, s, "short", t0, time.Hour, 48*time.Hour)
	if n := indexPages(); n < 2 {
		t.Errorf("records_result_expires_idx has %d pages after a result TTL shorter than the window, want an entry", n)
	}
}
