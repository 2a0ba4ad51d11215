DROP INDEX IF EXISTS {schema}.jobs_running_idx;
CREATE INDEX IF NOT EXISTS jobs_lease_idx ON {schema}.jobs (lease_expires_at) WHERE state = 'running';
CREATE INDEX IF NOT EXISTS jobs_running_scope_idx ON {schema}.jobs (tenant, queue)
    WHERE state = 'running' OR (state = 'cancelled' AND lease_expires_at IS NOT NULL);
CREATE INDEX IF NOT EXISTS jobs_cancel_hold_idx ON {schema}.jobs (lease_expires_at)
    WHERE state = 'cancelled' AND lease_expires_at IS NOT NULL;
