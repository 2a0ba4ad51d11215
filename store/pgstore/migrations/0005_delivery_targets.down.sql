DROP TABLE {schema}.delivery_targets;
