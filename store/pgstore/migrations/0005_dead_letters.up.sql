-- Dead letters that can be resolved (seed 002 resolved_at, seed 004
-- is_resolved) and the error code of a job's latest failure (seed 004
-- error_code).
ALTER TABLE {schema}.jobs ADD COLUMN error_code text NOT NULL DEFAULT '';
ALTER TABLE {schema}.jobs ADD COLUMN resolved_at timestamptz;
ALTER TABLE {schema}.jobs ADD COLUMN resolution_note text NOT NULL DEFAULT '';
CREATE INDEX jobs_dead_unresolved_idx ON {schema}.jobs (tenant, queue) WHERE state = 'dead' AND resolved_at IS NULL;
