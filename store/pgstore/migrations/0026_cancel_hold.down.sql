-- idem:no-transaction
-- The holds end (the cancelled jobs' leases are cleared) and 0002's
-- partition index is built concurrently beside 0026's, which it replaces.
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_cancel_hold_idx;
UPDATE {schema}.jobs SET lease_expires_at = NULL WHERE state = 'cancelled' AND lease_expires_at IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_partition_idx_new;
CREATE INDEX CONCURRENTLY jobs_partition_idx_new ON {schema}.jobs (tenant, queue, partition_key, id)
    WHERE partition_key <> '' AND state IN ('pending', 'scheduled', 'available', 'running', 'retryable');
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_partition_idx;
ALTER INDEX {schema}.jobs_partition_idx_new RENAME TO jobs_partition_idx;
