-- 0016: default limits. A flow_controls row of tenant '*' is a limit for
-- every tenant without one of its own for the same queue scope; each such
-- tenant's rate window under it is a row here (queue = the default's queue
-- scope, '' = every queue), written back (upserted) by the claim that
-- spends it while it holds the lock of the '*' row.
CREATE TABLE {schema}.flow_default_windows (
    queue        text        NOT NULL,
    tenant       text        NOT NULL,
    window_start timestamptz NOT NULL DEFAULT 'epoch',
    window_used  integer     NOT NULL DEFAULT 0,
    throttled    bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, tenant)
);
