-- 0015: a job may wait for its dependencies to finish whatever their
-- outcome (deps_any: completed, dead and cancelled all release it) instead
-- of requiring them all to complete; a batch may have such a job, its
-- completion job, created with it (on_finish_job_id).
ALTER TABLE {schema}.jobs ADD COLUMN deps_any boolean NOT NULL DEFAULT false;
ALTER TABLE {schema}.batches ADD COLUMN on_finish_job_id bigint;
