-- Dead letters that can be resolved (seed 002 resolved_at, seed 004
-- is_resolved) and the error code of a job's latest failure (seed 004
-- error_code).
ALTER TABLE {schema}.jobs ADD COLUMN error_code text NOT NULL DEFAULT '';
ALTER TABLE {schema}.jobs ADD COLUMN resolved_at timestamptz;
ALTER TABLE {schema}.jobs ADD COLUMN resolution_note text NOT NULL DEFAULT '';
CREATE INDEX jobs_dead_unresolved_idx ON {schema}.jobs (tenant, queue) WHERE state = 'dead' AND resolved_at IS NULL;

-- Batches (seed 001): a batch and its child jobs are created in one
-- transaction; (tenant, key) makes the creation exactly-once.
CREATE TABLE {schema}.batches (
    id         bigserial PRIMARY KEY,
    tenant     text NOT NULL,
    key        text NOT NULL,
    created_at timestamptz NOT NULL,
    metadata   json,
    UNIQUE (tenant, key)
);
ALTER TABLE {schema}.jobs ADD COLUMN batch_id bigint NOT NULL DEFAULT 0;
CREATE INDEX jobs_batch_idx ON {schema}.jobs (batch_id) WHERE batch_id <> 0;
