-- 0029: one partial index of the jobs that take a slot, jobs_running
-- (tenant, queue, lease_expires_at) WHERE running or holding (sqlSlotTaken),
-- in place of three that held the same rows or a part of them:
-- jobs_running_lease (lease_expires_at) WHERE running, for the rescuer;
-- jobs_running_scope (tenant, queue) WHERE running or holding (0028), for
-- the concurrency limits; jobs_cancel_hold (lease_expires_at) WHERE
-- holding (0026), for the end of holds. A claim entered two entries and a
-- finish removed two; now one each, and a heartbeat rewrites one instead
-- of two. The limits count a scope on its prefix (tenant, queue); the
-- rescuer, the end of holds and the lookup by claim token read it whole,
-- which is bounded by the jobs in flight. The statements that read it
-- repeat a term of its predicate (SQLite proves an OR predicate from one
-- of its terms).
DROP INDEX IF EXISTS jobs_running_lease;
DROP INDEX IF EXISTS jobs_running_scope;
DROP INDEX IF EXISTS jobs_cancel_hold;
CREATE INDEX jobs_running ON jobs (tenant, queue, lease_expires_at)
    WHERE (state = 'running' OR (state = 'cancelled' AND lease_expires_at IS NOT NULL));
