-- idem:no-transaction
-- 0017: records_job_idx goes. Its only reader was retention's "does a live
-- record still point at this job" check, which now finds the record by the
-- job's own key (records_pkey): a record names a job only for that job's
-- key. Every keyed insert wrote one more B-tree entry for it, and every
-- record update that is not HOT (a completion moves expires_at) another.
-- No transaction (migrate.go, noTxMarker): DROP INDEX CONCURRENTLY does
-- not lock the table against reads and writes.
DROP INDEX CONCURRENTLY IF EXISTS {schema}.records_job_idx;
