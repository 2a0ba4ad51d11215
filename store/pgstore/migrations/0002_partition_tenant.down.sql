DROP INDEX IF EXISTS {schema}.jobs_partition_idx;
CREATE INDEX jobs_partition_idx ON {schema}.jobs (queue, partition_key, id)
    WHERE partition_key <> '' AND state IN ('pending', 'scheduled', 'available', 'running', 'retryable');
