-- 0029: one partial index of the jobs that take a slot, jobs_running_idx
-- (tenant, queue, lease_expires_at) WHERE running or holding
-- (sqlSlotTaken), in place of three that held the same rows or a part of
-- them: jobs_lease_idx (lease_expires_at) WHERE running, for the rescuer;
-- jobs_running_scope_idx (tenant, queue) WHERE running or holding (0028),
-- for the concurrency limits; jobs_cancel_hold_idx (lease_expires_at)
-- WHERE holding (0026), for the end of holds. Every claim (a new row
-- version) entered an entry into the first two; now into one. The limits
-- count a scope on its prefix; the rescuer, the end of holds and the
-- lookups by claim token read it whole, which is bounded by the jobs in
-- flight (and, as before, the entries of finished jobs until VACUUM).
DROP INDEX IF EXISTS {schema}.jobs_lease_idx;
DROP INDEX IF EXISTS {schema}.jobs_running_scope_idx;
DROP INDEX IF EXISTS {schema}.jobs_cancel_hold_idx;
CREATE INDEX IF NOT EXISTS jobs_running_idx ON {schema}.jobs (tenant, queue, lease_expires_at)
    WHERE state = 'running' OR (state = 'cancelled' AND lease_expires_at IS NOT NULL);
