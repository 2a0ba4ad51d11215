-- idem:no-transaction
-- 0028: a job of a FIFO partition cancelled while it runs keeps its lease
-- (the hold, 0026) while its handler may still run, and the concurrency
-- limits of its scope count it as running until the hold ends, as the
-- head rule does: a limit of N bounds the handlers that may run at once.
-- The running counts of the claims read jobs_running_scope_idx, so its
-- predicate takes the holding jobs in, spelt as the counts spell it
-- (sqlSlotTaken in flow.go). The index holds only running and holding
-- jobs; building it reads the jobs table once.
--
-- No transaction (migrate.go, noTxMarker): the new index is built beside
-- the old one with CREATE INDEX CONCURRENTLY (claims, reads and writes of
-- jobs go on; the build waits for the transactions open before it), then
-- replaces it. Each statement may run again after a crash midway: the
-- first drops what an interrupted build left (an INVALID index).
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_running_scope_idx_new;
CREATE INDEX CONCURRENTLY jobs_running_scope_idx_new ON {schema}.jobs (tenant, queue)
    WHERE state = 'running' OR (state = 'cancelled' AND lease_expires_at IS NOT NULL);
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_running_scope_idx;
ALTER INDEX {schema}.jobs_running_scope_idx_new RENAME TO jobs_running_scope_idx;
