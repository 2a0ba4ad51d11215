-- 0006: delivery targets, the webhook URLs the jobs of a queue or a kind
-- are pushed to. Secrets are kept (they sign every push) and never listed
-- by the HTTP API.
CREATE TABLE delivery_targets (
    tenant     TEXT    NOT NULL,
    name       TEXT    NOT NULL,
    queue      TEXT    NOT NULL DEFAULT '',
    kind       TEXT    NOT NULL DEFAULT '',
    url        TEXT    NOT NULL,
    secrets    TEXT    NOT NULL DEFAULT '[]',
    timeout_ms INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, name)
);

-- The delivery log: recent attempts that name a target (per-target stats).
CREATE INDEX attempts_delivery ON attempts (finished_at) WHERE target <> '';
