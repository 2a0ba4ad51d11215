-- idem:no-transaction
-- 0030: a job of a FIFO partition cancelled while it runs and retried
-- while it holds its partition (0026) waits to run again until its old
-- lease ends, and keeps that lease's end meanwhile; its old handler may
-- still run until then, so the concurrency limits of its scope count it as
-- running until that lease ends (sqlSlotTaken in flow.go: the counts bound
-- it by the claim's now). jobs_running_scope_idx (0028) held the running
-- and the cancelled holding jobs only; its predicate takes the retried
-- holding ones in too (waiting, with a lease end), so that the counts,
-- whose every arm implies one of the predicate's, keep reading it. The
-- index holds only running and holding jobs; building it reads the jobs
-- table once. Heartbeats and the rescuer keep jobs_lease_idx, the end of
-- holds jobs_cancel_hold_idx.
--
-- No transaction (migrate.go, noTxMarker): the new index is built beside
-- the old one with CREATE INDEX CONCURRENTLY (claims, reads and writes of
-- jobs go on; the build waits for the transactions open before it), then
-- replaces it. Each statement may run again after a crash midway: the
-- first drops what an interrupted build left (an INVALID index).
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_running_scope_idx_new;
CREATE INDEX CONCURRENTLY jobs_running_scope_idx_new ON {schema}.jobs (tenant, queue)
    WHERE state = 'running' OR (state = 'cancelled' AND lease_expires_at IS NOT NULL)
        OR (state IN ('pending', 'scheduled', 'available') AND lease_expires_at IS NOT NULL);
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_running_scope_idx;
ALTER INDEX {schema}.jobs_running_scope_idx_new RENAME TO jobs_running_scope_idx;
