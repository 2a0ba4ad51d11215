-- idem:no-transaction
-- Dead letters that can be resolved (seed 002 resolved_at, seed 004
-- is_resolved) and the error code of a job's latest failure (seed 004
-- error_code). No transaction (migrate.go, noTxMarker): the columns are
-- added at once (no rewrite: ACCESS EXCLUSIVE for a moment), the indexes
-- built concurrently; every statement may run again after a crash midway.
ALTER TABLE {schema}.jobs ADD COLUMN IF NOT EXISTS error_code text NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS resolved_at timestamptz,
    ADD COLUMN IF NOT EXISTS resolution_note text NOT NULL DEFAULT '';
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_dead_unresolved_idx;
CREATE INDEX CONCURRENTLY jobs_dead_unresolved_idx ON {schema}.jobs (tenant, queue) WHERE state = 'dead' AND resolved_at IS NULL;

-- Batches (seed 001): a batch and its child jobs are created in one
-- transaction; (tenant, key) makes the creation exactly-once.
CREATE TABLE IF NOT EXISTS {schema}.batches (
    id         bigserial PRIMARY KEY,
    tenant     text NOT NULL,
    key        text NOT NULL,
    created_at timestamptz NOT NULL,
    metadata   json,
    UNIQUE (tenant, key)
);
ALTER TABLE {schema}.jobs ADD COLUMN IF NOT EXISTS batch_id bigint NOT NULL DEFAULT 0;
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_batch_idx;
CREATE INDEX CONCURRENTLY jobs_batch_idx ON {schema}.jobs (batch_id) WHERE batch_id <> 0;
