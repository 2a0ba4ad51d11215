DROP TABLE {schema}.events;
DROP INDEX {schema}.attempts_delivery_idx;
DROP TABLE {schema}.delivery_targets;
