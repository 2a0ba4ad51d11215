-- idem:no-transaction
-- 0013: the full list indexes of 0012 on queue, kind, state and created_at
-- are dropped: every insert paid for four more B-tree entries and every
-- state change for (tenant, state, id), about a third of the store's write
-- throughput (BENCHMARKS.md), to speed up operator lists. Lists by these
-- filters now walk the tenant's jobs newest first (jobs_tenant_idx) and stop
-- at the page size; state lists of live or dead jobs use the partial indexes
-- that the runtime keeps anyway (docs/indexes.md). The partial key and
-- partition indexes stay: they cost nothing for jobs without a key or a
-- partition. No transaction (migrate.go, noTxMarker): DROP INDEX
-- CONCURRENTLY does not lock jobs against reads and writes.
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_list_queue;
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_list_kind;
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_list_state;
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_list_created;
