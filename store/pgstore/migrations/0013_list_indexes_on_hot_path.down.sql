CREATE INDEX IF NOT EXISTS jobs_list_queue ON {schema}.jobs (tenant, queue, id);
CREATE INDEX IF NOT EXISTS jobs_list_kind ON {schema}.jobs (tenant, kind, id);
CREATE INDEX IF NOT EXISTS jobs_list_state ON {schema}.jobs (tenant, state, id);
CREATE INDEX IF NOT EXISTS jobs_list_created ON {schema}.jobs (tenant, created_at);
