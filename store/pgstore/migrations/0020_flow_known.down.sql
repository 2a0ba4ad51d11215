DROP TABLE IF EXISTS {schema}.flow_known;
