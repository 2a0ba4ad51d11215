-- idem:no-transaction
-- FIFO partitions are scoped by tenant: (tenant, queue, partition_key).
-- No transaction (migrate.go, noTxMarker): the index is built concurrently
-- beside the old one, which it then replaces; every statement may run
-- again after a crash midway (the first drops an interrupted build).
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_partition_idx_new;
CREATE INDEX CONCURRENTLY jobs_partition_idx_new ON {schema}.jobs (tenant, queue, partition_key, id)
    WHERE partition_key <> '' AND state IN ('pending', 'scheduled', 'available', 'running', 'retryable');
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_partition_idx;
ALTER INDEX {schema}.jobs_partition_idx_new RENAME TO jobs_partition_idx;
