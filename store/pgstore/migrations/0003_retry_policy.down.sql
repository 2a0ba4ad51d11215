ALTER TABLE {schema}.jobs DROP COLUMN IF EXISTS retry_policy;
