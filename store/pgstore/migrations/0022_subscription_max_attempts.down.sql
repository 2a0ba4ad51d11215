ALTER TABLE {schema}.delivery_targets DROP COLUMN IF EXISTS max_attempts;
