-- 0006: seed fidelity. Dead letters that can be resolved (seed 002 resolved_at, seed 004
-- is_resolved) and the error code of a job's latest failure (seed 004
-- error_code).
ALTER TABLE jobs ADD COLUMN error_code TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN resolved_at INTEGER;
ALTER TABLE jobs ADD COLUMN resolution_note TEXT NOT NULL DEFAULT '';
CREATE INDEX jobs_dead_unresolved_idx ON jobs (tenant, queue) WHERE state = 'dead' AND resolved_at IS NULL;

-- Batches (seed 001): a batch and its child jobs are created in one
-- transaction; (tenant, key) makes the creation exactly-once.
CREATE TABLE batches (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant     TEXT NOT NULL,
    key        TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    metadata   BLOB,
    UNIQUE (tenant, key)
);
ALTER TABLE jobs ADD COLUMN batch_id INTEGER NOT NULL DEFAULT 0;
CREATE INDEX jobs_batch_idx ON jobs (batch_id) WHERE batch_id <> 0;
