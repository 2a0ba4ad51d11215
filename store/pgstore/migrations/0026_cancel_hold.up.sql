-- idem:no-transaction
-- 0026: a job of a FIFO partition cancelled while it runs keeps its
-- partition until its process acknowledges the cancel (the refused finish
-- of its lease) or its lease ends (the rescuer): JobCancel keeps its
-- lease_token and lease_expires_at (the hold). The head rule counts such a
-- job as one that runs, so the partition index holds it too, and the
-- rescuer finds the holds whose lease ended through jobs_cancel_hold_idx.
--
-- Upgrade: before 0026 a cancel cleared the lease, so no cancelled row
-- holds anything; the UPDATE makes sure of it (a cancelled job whose
-- handler may still run under an older binary is released, as it was).
--
-- No transaction (migrate.go, noTxMarker): the new partition index is
-- built concurrently beside the old one, which it then replaces, and
-- jobs_cancel_hold_idx concurrently too. Every statement may run again
-- after a crash midway (each build first drops what an interrupted one
-- left).
UPDATE {schema}.jobs SET lease_expires_at = NULL WHERE state = 'cancelled' AND lease_expires_at IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_partition_idx_new;
CREATE INDEX CONCURRENTLY jobs_partition_idx_new ON {schema}.jobs (tenant, queue, partition_key, id)
    WHERE partition_key <> '' AND (state IN ('pending', 'scheduled', 'available', 'running', 'retryable')
        OR (state = 'cancelled' AND lease_expires_at IS NOT NULL));
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_partition_idx;
ALTER INDEX {schema}.jobs_partition_idx_new RENAME TO jobs_partition_idx;
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_cancel_hold_idx;
CREATE INDEX CONCURRENTLY jobs_cancel_hold_idx ON {schema}.jobs (lease_expires_at)
    WHERE state = 'cancelled' AND lease_expires_at IS NOT NULL;
