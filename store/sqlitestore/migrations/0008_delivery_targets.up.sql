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

-- Topic subscriptions are targets of a topic, with an event-type filter.
ALTER TABLE delivery_targets ADD COLUMN topic TEXT NOT NULL DEFAULT '';
ALTER TABLE delivery_targets ADD COLUMN event_types TEXT NOT NULL DEFAULT '[]';

-- The event log of the topics (kept 90 days by default, independent of
-- the delivery jobs made from each event).
CREATE TABLE events (
    id            INTEGER PRIMARY KEY,
    tenant        TEXT    NOT NULL,
    topic         TEXT    NOT NULL,
    event_key     TEXT    NOT NULL DEFAULT '',
    type          TEXT    NOT NULL DEFAULT '',
    partition_key TEXT    NOT NULL DEFAULT '',
    payload       TEXT    NOT NULL,
    metadata      TEXT,
    deliveries    INTEGER NOT NULL DEFAULT 0,
    created_at    INTEGER NOT NULL
);
CREATE UNIQUE INDEX events_key ON events (tenant, topic, event_key) WHERE event_key <> '';
CREATE INDEX events_topic ON events (tenant, topic, id);
CREATE INDEX events_created ON events (created_at);
