-- idem:no-transaction
-- 0010's jobs_claim_tenant_idx (every claimable state), built concurrently
-- beside 0031's, which it replaces; jobs_due_idx goes (as
-- 0031_due_index.up.sql).
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_claim_tenant_idx_new;
CREATE INDEX CONCURRENTLY jobs_claim_tenant_idx_new ON {schema}.jobs (queue, tenant, priority DESC, run_at, id)
    WHERE state IN ('available', 'scheduled', 'retryable');
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_claim_tenant_idx;
ALTER INDEX {schema}.jobs_claim_tenant_idx_new RENAME TO jobs_claim_tenant_idx;
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_due_idx;
