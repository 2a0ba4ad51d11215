-- 0004: a job's own backoff policy (JSON, as given by the runtime).
ALTER TABLE jobs ADD COLUMN retry_policy BLOB;
