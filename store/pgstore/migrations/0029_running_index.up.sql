-- 0029: SQLite merges its three partial indexes of the jobs that take a
-- slot (running, and cancelled while holding their partition) into one,
-- jobs_running. PostgreSQL keeps jobs_lease_idx, jobs_running_scope_idx and
-- jobs_cancel_hold_idx: with one (tenant, queue, lease_expires_at) index its
-- planner read the whole index, dead entries of finished jobs included,
-- for heartbeats (a hash join over a bitmap scan instead of a range on
-- lease_expires_at) and took jobs_finished_idx for the end of holds on
-- some data. The number is kept so both stores count migrations alike.
SELECT 1;
