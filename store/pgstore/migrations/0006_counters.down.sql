DROP TABLE IF EXISTS {schema}.counters;
