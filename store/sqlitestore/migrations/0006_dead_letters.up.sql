-- 0006: dead letters that can be resolved (seed 002 resolved_at, seed 004
-- is_resolved) and the error code of a job's latest failure (seed 004
-- error_code).
ALTER TABLE jobs ADD COLUMN error_code TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN resolved_at INTEGER;
ALTER TABLE jobs ADD COLUMN resolution_note TEXT NOT NULL DEFAULT '';
CREATE INDEX jobs_dead_unresolved_idx ON jobs (tenant, queue) WHERE state = 'dead' AND resolved_at IS NULL;
