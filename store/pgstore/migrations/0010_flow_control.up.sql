-- idem:no-transaction
-- 0005: flow control. One row per scope (tenant, queue; '' = any): its
-- limits and tenant weight, whether it is paused, its rate window and throttling counter.
-- Claims under a limit lock its row (FOR UPDATE), so the budget is spent
-- by one claim at a time across all nodes.
--
-- No transaction (migrate.go, noTxMarker): the indexes of jobs are built
-- concurrently; every statement may run again after a crash midway (each
-- build first drops what an interrupted one left).
CREATE TABLE IF NOT EXISTS {schema}.flow_controls (
    tenant       text        NOT NULL,
    queue        text        NOT NULL,
    rate         integer     NOT NULL DEFAULT 0,
    period_us    bigint      NOT NULL DEFAULT 0,
    concurrency  integer     NOT NULL DEFAULT 0,
    weight       integer     NOT NULL DEFAULT 0,
    paused       boolean     NOT NULL DEFAULT false,
    window_start timestamptz NOT NULL DEFAULT 'epoch',
    window_used  integer     NOT NULL DEFAULT 0,
    throttled    bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, queue)
);

-- Fair claims: the next tenant with claimable work in a queue (skip scan),
-- then that tenant's jobs in claim order.
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_claim_tenant_idx;
CREATE INDEX CONCURRENTLY jobs_claim_tenant_idx ON {schema}.jobs (queue, tenant, priority DESC, run_at, id)
    WHERE state IN ('available', 'scheduled', 'retryable');

-- Concurrency limits count running jobs per (tenant, queue).
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_running_scope_idx;
CREATE INDEX CONCURRENTLY jobs_running_scope_idx ON {schema}.jobs (tenant, queue) WHERE state = 'running';
