-- 0005: every documented filter of JobList is served by an index that
-- starts with the tenant, so a list never scans a tenant's jobs (see
-- docs/indexes.md). The partial indexes cover only jobs that have the key;
-- the list query repeats the "<> ''" term so the planner may use them.
CREATE INDEX jobs_list_queue ON {schema}.jobs (tenant, queue, id);
CREATE INDEX jobs_list_kind ON {schema}.jobs (tenant, kind, id);
CREATE INDEX jobs_list_state ON {schema}.jobs (tenant, state, id);
CREATE INDEX jobs_list_partition ON {schema}.jobs (tenant, partition_key, id) WHERE partition_key <> '';
CREATE INDEX jobs_list_key ON {schema}.jobs (tenant, idempotency_key, id) WHERE idempotency_key <> '';
CREATE INDEX jobs_list_created ON {schema}.jobs (tenant, created_at);
