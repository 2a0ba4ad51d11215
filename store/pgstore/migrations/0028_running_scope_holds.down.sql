-- idem:no-transaction
-- 0027's jobs_running_scope_idx (running jobs only), built concurrently
-- beside 0028's, which it replaces (as 0028_running_scope_holds.up.sql).
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_running_scope_idx_new;
CREATE INDEX CONCURRENTLY jobs_running_scope_idx_new ON {schema}.jobs (tenant, queue) WHERE state = 'running';
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_running_scope_idx;
ALTER INDEX {schema}.jobs_running_scope_idx_new RENAME TO jobs_running_scope_idx;
