-- A job's own backoff policy (JSON, as given by the runtime).
ALTER TABLE {schema}.jobs ADD COLUMN retry_policy json;
