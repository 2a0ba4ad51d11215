-- idem:no-transaction
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_batch_idx;
ALTER TABLE {schema}.jobs DROP COLUMN IF EXISTS batch_id;
DROP TABLE IF EXISTS {schema}.batches;
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_dead_unresolved_idx;
ALTER TABLE {schema}.jobs DROP COLUMN IF EXISTS resolution_note, DROP COLUMN IF EXISTS resolved_at,
    DROP COLUMN IF EXISTS error_code;
