-- Named per-tenant counters (cache hits and misses) shared by every node.
CREATE TABLE IF NOT EXISTS {schema}.counters (
    tenant text   NOT NULL,
    name   text   NOT NULL,
    value  bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, name)
);
