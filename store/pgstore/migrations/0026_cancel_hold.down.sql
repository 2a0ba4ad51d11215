DROP INDEX IF EXISTS {schema}.jobs_cancel_hold_idx;
UPDATE {schema}.jobs SET lease_expires_at = NULL WHERE state = 'cancelled' AND lease_expires_at IS NOT NULL;
DROP INDEX IF EXISTS {schema}.jobs_partition_idx;
CREATE INDEX jobs_partition_idx ON {schema}.jobs (tenant, queue, partition_key, id)
    WHERE partition_key <> '' AND state IN ('pending', 'scheduled', 'available', 'running', 'retryable');
