-- idem:no-transaction
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_list_queue;
CREATE INDEX CONCURRENTLY jobs_list_queue ON {schema}.jobs (tenant, queue, id);
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_list_kind;
CREATE INDEX CONCURRENTLY jobs_list_kind ON {schema}.jobs (tenant, kind, id);
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_list_state;
CREATE INDEX CONCURRENTLY jobs_list_state ON {schema}.jobs (tenant, state, id);
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_list_created;
CREATE INDEX CONCURRENTLY jobs_list_created ON {schema}.jobs (tenant, created_at);
