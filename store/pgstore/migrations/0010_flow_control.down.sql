-- idem:no-transaction
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_running_scope_idx;
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_claim_tenant_idx;
DROP TABLE IF EXISTS {schema}.flow_controls;
