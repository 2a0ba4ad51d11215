-- idem:no-transaction
DROP TABLE IF EXISTS {schema}.events;
DROP INDEX CONCURRENTLY IF EXISTS {schema}.attempts_delivery_idx;
DROP TABLE IF EXISTS {schema}.delivery_targets;
