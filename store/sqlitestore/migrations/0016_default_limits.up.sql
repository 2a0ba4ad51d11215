-- 0016: default limits. A flow_controls row of tenant '*' is a limit for
-- every tenant without one of its own for the same queue scope; each such
-- tenant's rate window under it is a row here (queue = the default's queue
-- scope, '' = every queue), written back by the claim that spends it.
CREATE TABLE flow_default_windows (
    queue           TEXT    NOT NULL,
    tenant          TEXT    NOT NULL,
    window_start_us INTEGER NOT NULL DEFAULT 0,
    window_used     INTEGER NOT NULL DEFAULT 0,
    throttled       INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, tenant)
);
