DROP INDEX IF EXISTS {schema}.jobs_pending_idx;
