-- idem:no-transaction
-- A record whose result the expiry sweep dropped (a result TTL shorter than
-- the window) is left in progress with no lease and no result, its key,
-- job and window kept: the versions before 0023 read a completed record as
-- its result whatever its bytes (a NULL result would be served as a cached
-- null). Completed results are never NULL otherwise.
UPDATE {schema}.records SET status = 'in_progress', result = NULL, result_hash = '', size_bytes = 0,
    compressed = false, result_job_id = NULL, completed_at = NULL, duration_ms = 0,
    lease_owner = NULL, lease_until = NULL
WHERE status = 'completed' AND result IS NULL;
DROP INDEX CONCURRENTLY IF EXISTS {schema}.records_result_expires_idx;
ALTER TABLE {schema}.records DROP COLUMN IF EXISTS result_expires_at;
