DROP INDEX IF EXISTS {schema}.jobs_batch_idx;
ALTER TABLE {schema}.jobs DROP COLUMN IF EXISTS batch_id;
DROP TABLE IF EXISTS {schema}.batches;
DROP INDEX IF EXISTS {schema}.jobs_dead_unresolved_idx;
ALTER TABLE {schema}.jobs DROP COLUMN IF EXISTS resolution_note;
ALTER TABLE {schema}.jobs DROP COLUMN IF EXISTS resolved_at;
ALTER TABLE {schema}.jobs DROP COLUMN IF EXISTS error_code;
