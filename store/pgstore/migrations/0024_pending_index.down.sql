-- idem:no-transaction
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_pending_idx;
