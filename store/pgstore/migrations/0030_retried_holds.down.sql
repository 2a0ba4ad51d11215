-- idem:no-transaction
-- 0028's jobs_running_scope_idx (running and cancelled holding jobs),
-- built concurrently beside 0030's, which it replaces (as
-- 0030_retried_holds.up.sql).
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_running_scope_idx_new;
CREATE INDEX CONCURRENTLY jobs_running_scope_idx_new ON {schema}.jobs (tenant, queue)
    WHERE state = 'running' OR (state = 'cancelled' AND lease_expires_at IS NOT NULL);
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_running_scope_idx;
ALTER INDEX {schema}.jobs_running_scope_idx_new RENAME TO jobs_running_scope_idx;
