-- idem:no-transaction
DROP INDEX CONCURRENTLY IF EXISTS {schema}.records_job_idx;
CREATE INDEX CONCURRENTLY records_job_idx ON {schema}.records (job_id) WHERE job_id IS NOT NULL;
