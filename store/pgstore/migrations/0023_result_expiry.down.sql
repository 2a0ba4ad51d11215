DROP INDEX IF EXISTS {schema}.records_result_expires_idx;
ALTER TABLE {schema}.records DROP COLUMN IF EXISTS result_expires_at;
