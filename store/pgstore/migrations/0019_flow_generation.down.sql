DROP TRIGGER IF EXISTS flow_controls_def_ver ON {schema}.flow_controls;
DROP FUNCTION IF EXISTS {schema}.flow_def_ver();
ALTER TABLE {schema}.flow_controls DROP COLUMN IF EXISTS def_ver;
DROP SEQUENCE IF EXISTS {schema}.flow_def_seq;
DROP TRIGGER IF EXISTS flow_controls_defined ON {schema}.flow_controls;
DROP FUNCTION IF EXISTS {schema}.flow_generation_bump();
DROP TABLE IF EXISTS {schema}.flow_generation;
