-- 0030: a job of a FIFO partition cancelled while it runs and retried
-- while it holds its partition (0026) waits to run again until its old
-- lease ends, and keeps that lease's end meanwhile; its old handler may
-- still run until then, so the concurrency limits of its scope count it as
-- running until that lease ends (sqlSlotTaken in queries.go: the counts
-- bound it by their now). jobs_running (0029) held the running and the
-- cancelled holding jobs only; its predicate takes the retried holding
-- ones in too (waiting, with a lease end), spelt as the counts spell it
-- (sqlSlotIndexed: SQLite uses a partial index only for a WHERE that
-- repeats its predicate, or one arm of it, term for term; states as a
-- chain of ORs, 0027). The index holds only running and holding jobs;
-- rebuilding it reads the jobs table once.
DROP INDEX IF EXISTS jobs_running;
CREATE INDEX jobs_running ON jobs (tenant, queue, lease_expires_at)
    WHERE (state = 'running' OR (state = 'cancelled' AND lease_expires_at IS NOT NULL)
    OR ((state = 'pending' OR state = 'scheduled' OR state = 'available') AND lease_expires_at IS NOT NULL));
