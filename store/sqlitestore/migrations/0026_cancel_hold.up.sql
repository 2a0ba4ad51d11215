-- 0026: a job of a FIFO partition cancelled while it runs keeps its
-- partition until its process acknowledges the cancel (the refused finish
-- of its lease) or its lease ends (the rescuer): JobCancel keeps its
-- lease_expires_at (the hold). The head rule counts such a job as one that
-- runs, so the partition index holds it too, and the rescuer finds the
-- holds whose lease ended through jobs_cancel_hold.
--
-- The states are a chain of ORs, not an IN list: see 0027.
--
-- Upgrade: before 0026 a cancel cleared the lease, so no cancelled row
-- holds anything; the UPDATE makes sure of it.
UPDATE jobs SET lease_expires_at = NULL WHERE state = 'cancelled' AND lease_expires_at IS NOT NULL;
DROP INDEX IF EXISTS jobs_partition_head;
CREATE INDEX jobs_partition_head ON jobs (queue, partition_key, tenant, id)
    WHERE partition_key <> '' AND ((state = 'pending' OR state = 'scheduled' OR state = 'available'
        OR state = 'running' OR state = 'retryable')
        OR (state = 'cancelled' AND lease_expires_at IS NOT NULL));
CREATE INDEX IF NOT EXISTS jobs_cancel_hold ON jobs (lease_expires_at)
    WHERE state = 'cancelled' AND lease_expires_at IS NOT NULL;
