-- 0028: a job of a FIFO partition cancelled while it runs keeps its
-- lease_expires_at (the hold, 0026) while its handler may still run, and
-- the concurrency limits of its scope count it as running until the hold
-- ends, as the head rule does: a limit of N bounds the handlers that may
-- run at once. The running counts of the claims read jobs_running_scope,
-- so its predicate takes the holding jobs in, spelt as the counts spell it
-- (sqlSlotTaken in queries.go: SQLite uses a partial index only for a
-- WHERE that repeats its predicate term for term). The index holds only
-- running and holding jobs; rebuilding it reads the jobs table once.
DROP INDEX IF EXISTS jobs_running_scope;
CREATE INDEX jobs_running_scope ON jobs (tenant, queue)
    WHERE (state = 'running' OR (state = 'cancelled' AND lease_expires_at IS NOT NULL));
