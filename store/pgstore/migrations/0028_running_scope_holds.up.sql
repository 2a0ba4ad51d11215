-- 0028: a job of a FIFO partition cancelled while it runs keeps its lease
-- (the hold, 0026) while its handler may still run, and the concurrency
-- limits of its scope count it as running until the hold ends, as the
-- head rule does: a limit of N bounds the handlers that may run at once.
-- The running counts of the claims read jobs_running_scope_idx, so its
-- predicate takes the holding jobs in, spelt as the counts spell it
-- (sqlSlotTaken in flow.go). The index holds only running and holding
-- jobs; rebuilding it reads the jobs table once, under the migration's
-- lock (writes of jobs wait meanwhile).
DROP INDEX IF EXISTS {schema}.jobs_running_scope_idx;
CREATE INDEX jobs_running_scope_idx ON {schema}.jobs (tenant, queue)
    WHERE state = 'running' OR (state = 'cancelled' AND lease_expires_at IS NOT NULL);
