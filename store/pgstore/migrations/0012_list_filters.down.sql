DROP INDEX IF EXISTS {schema}.jobs_list_queue;
DROP INDEX IF EXISTS {schema}.jobs_list_kind;
DROP INDEX IF EXISTS {schema}.jobs_list_state;
DROP INDEX IF EXISTS {schema}.jobs_list_partition;
DROP INDEX IF EXISTS {schema}.jobs_list_key;
DROP INDEX IF EXISTS {schema}.jobs_list_created;
