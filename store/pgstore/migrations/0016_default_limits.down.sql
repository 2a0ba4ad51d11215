DROP TABLE IF EXISTS {schema}.flow_default_windows;
