DROP INDEX IF EXISTS {schema}.jobs_running_scope_idx;
CREATE INDEX jobs_running_scope_idx ON {schema}.jobs (tenant, queue)
    WHERE state = 'running' OR (state = 'cancelled' AND lease_expires_at IS NOT NULL);
