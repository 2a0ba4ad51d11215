DROP INDEX IF EXISTS {schema}.jobs_running_scope_idx;
CREATE INDEX jobs_running_scope_idx ON {schema}.jobs (tenant, queue) WHERE state = 'running';
