-- idem:no-transaction
-- 0023: a record's cached result expires on its own (completed_at + the
-- result TTL), which may come before the record's expiry (the later of
-- that and its dedup window's end): reads stop serving the result then,
-- and the expiry sweep drops its bytes while the record stays for the
-- window. A result stored before this migration keeps the record's expiry:
-- a NULL result_expires_at reads as expires_at, so the records are not
-- rewritten here (that took 10 s for a million completed records).
--
-- No transaction (migrate.go, noTxMarker): the ALTER TABLE (no rewrite)
-- holds its ACCESS EXCLUSIVE lock for a moment only, the UPDATE locks only
-- the rows it changes, the index is built concurrently. Every statement
-- may run again after a crash midway: the UPDATE leaves no record it
-- matches, and the build first drops what an interrupted one left.
ALTER TABLE {schema}.records ADD COLUMN IF NOT EXISTS result_expires_at timestamptz;
-- A completion left in its job row (docs/postgres.md, "The result at
-- completion") is read from it only while its result outlives the window
-- from now on; those whose result expires earlier are written into their
-- records, as a completion of such a job is written from now on.
UPDATE {schema}.records r SET status = 'completed',
    result = convert_to(COALESCE(dj.result::text, 'null'), 'UTF8'),
    result_hash = encode(sha256(convert_to(COALESCE(dj.result::text, 'null'), 'UTF8')), 'hex'),
    size_bytes = octet_length(convert_to(COALESCE(dj.result::text, 'null'), 'UTF8')),
    compressed = false, result_job_id = dj.id, completed_at = dj.finished_at, duration_ms = dj.duration_ms,
    result_expires_at = dj.finished_at + dj.result_ttl_us * interval '1 microsecond'
FROM {schema}.jobs dj
WHERE r.status = 'in_progress' AND r.lease_owner IS NULL AND r.job_id = dj.id
  AND dj.state = 'completed' AND NOT dj.was_cached
  AND r.tenant = dj.tenant AND r.key = dj.idempotency_key AND r.created_at = dj.created_at
  AND dj.dedup_window_us > 0 AND r.expires_at = r.dedup_until
  AND dj.finished_at + dj.result_ttl_us * interval '1 microsecond' < r.dedup_until;
-- The sweep's index holds only the records that outlive their result (none
-- with the defaults, window = result TTL, nor any before this migration).
DROP INDEX CONCURRENTLY IF EXISTS {schema}.records_result_expires_idx;
CREATE INDEX CONCURRENTLY records_result_expires_idx ON {schema}.records (result_expires_at)
    WHERE result IS NOT NULL AND (expires_at IS NULL OR result_expires_at < expires_at);
