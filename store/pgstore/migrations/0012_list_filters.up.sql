-- idem:no-transaction
-- 0005: every documented filter of JobList is served by an index that
-- starts with the tenant, so a list never scans a tenant's jobs (see
-- docs/indexes.md). The partial indexes cover only jobs that have the key;
-- the list query repeats the "<> ''" term so the planner may use them.
-- No transaction (migrate.go, noTxMarker): built concurrently; each build
-- first drops what an interrupted one left.
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_list_queue;
CREATE INDEX CONCURRENTLY jobs_list_queue ON {schema}.jobs (tenant, queue, id);
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_list_kind;
CREATE INDEX CONCURRENTLY jobs_list_kind ON {schema}.jobs (tenant, kind, id);
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_list_state;
CREATE INDEX CONCURRENTLY jobs_list_state ON {schema}.jobs (tenant, state, id);
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_list_partition;
CREATE INDEX CONCURRENTLY jobs_list_partition ON {schema}.jobs (tenant, partition_key, id) WHERE partition_key <> '';
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_list_key;
CREATE INDEX CONCURRENTLY jobs_list_key ON {schema}.jobs (tenant, idempotency_key, id) WHERE idempotency_key <> '';
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_list_created;
CREATE INDEX CONCURRENTLY jobs_list_created ON {schema}.jobs (tenant, created_at);
