-- idem:no-transaction
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_list_queue;
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_list_kind;
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_list_state;
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_list_partition;
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_list_key;
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_list_created;
