-- idem:no-transaction
-- 0024: pending jobs (waiting for a dependency) by creation time. The per-kind
-- summary of /v1/stats (JobKindStats) counts the jobs created in the last
-- 24 hours through partial indexes only (finished jobs by finish time,
-- claimable and running ones by their runtime indexes); pending jobs had
-- none, so the query scanned the whole table. The index is partial over a
-- small set: a job without dependencies never enters it. No transaction
-- (migrate.go, noTxMarker): built concurrently, after dropping what an
-- interrupted build left.
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_pending_idx;
CREATE INDEX CONCURRENTLY jobs_pending_idx ON {schema}.jobs (created_at) WHERE state = 'pending';
