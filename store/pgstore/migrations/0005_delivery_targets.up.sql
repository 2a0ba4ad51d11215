-- Delivery targets: the webhook URLs the jobs of a queue or a kind are
-- pushed to. Secrets are kept (they sign every push) and never listed by
-- the HTTP API.
CREATE TABLE {schema}.delivery_targets (
    tenant     text        NOT NULL,
    name       text        NOT NULL,
    queue      text        NOT NULL DEFAULT '',
    kind       text        NOT NULL DEFAULT '',
    url        text        NOT NULL,
    secrets    jsonb       NOT NULL DEFAULT '[]',
    timeout_ms bigint      NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (tenant, name)
);

-- The delivery log: recent attempts that name a target (per-target stats).
CREATE INDEX attempts_delivery_idx ON {schema}.attempts (finished_at) WHERE target <> '';
