DROP TABLE IF EXISTS {schema}.api_keys;
DROP TABLE IF EXISTS {schema}.leaders;
DROP TABLE IF EXISTS {schema}.records;
DROP TABLE IF EXISTS {schema}.attempts;
DROP TABLE IF EXISTS {schema}.jobs;
