ALTER TABLE {schema}.batches DROP COLUMN IF EXISTS on_finish_job_id;
ALTER TABLE {schema}.jobs DROP COLUMN IF EXISTS deps_any;
