CREATE INDEX IF NOT EXISTS records_job_idx ON {schema}.records (job_id) WHERE job_id IS NOT NULL;
