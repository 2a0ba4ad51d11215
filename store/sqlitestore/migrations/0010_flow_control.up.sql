-- 0006: flow control. One row per scope (tenant, queue; '' = any): its
-- limits and tenant weight, whether it is paused, its rate window and throttling counter.
CREATE TABLE flow_controls (
    tenant          TEXT    NOT NULL,
    queue           TEXT    NOT NULL,
    rate            INTEGER NOT NULL DEFAULT 0,
    period_us       INTEGER NOT NULL DEFAULT 0,
    concurrency     INTEGER NOT NULL DEFAULT 0,
    weight          INTEGER NOT NULL DEFAULT 0,
    paused          INTEGER NOT NULL DEFAULT 0,
    window_start_us INTEGER NOT NULL DEFAULT 0,
    window_used     INTEGER NOT NULL DEFAULT 0,
    throttled       INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, queue)
);

-- Fair claims: the next tenant with claimable work in a queue (skip scan),
-- then that tenant's jobs in claim order.
CREATE INDEX jobs_claim_tenant ON jobs (queue, tenant, priority DESC, run_at, id)
    WHERE state IN ('available', 'scheduled', 'retryable');

-- Concurrency limits count running jobs per (tenant, queue).
CREATE INDEX jobs_running_scope ON jobs (tenant, queue) WHERE state = 'running';
