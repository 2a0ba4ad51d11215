-- idem:no-transaction
-- Built concurrently beside 0002's index, which it replaces (as the up step).
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_partition_idx_new;
CREATE INDEX CONCURRENTLY jobs_partition_idx_new ON {schema}.jobs (queue, partition_key, id)
    WHERE partition_key <> '' AND state IN ('pending', 'scheduled', 'available', 'running', 'retryable');
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_partition_idx;
ALTER INDEX {schema}.jobs_partition_idx_new RENAME TO jobs_partition_idx;
