-- 0003: FIFO partitions are scoped by tenant: the head check looks up
-- unfinished jobs by (queue, partition_key, tenant).
DROP INDEX jobs_partition_head;
CREATE INDEX jobs_partition_head ON jobs (queue, partition_key, tenant, id)
    WHERE partition_key <> '' AND state IN ('pending', 'scheduled', 'available', 'running', 'retryable');
