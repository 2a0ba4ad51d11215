-- idem:no-transaction
-- Delivery targets: the webhook URLs the jobs of a queue or a kind are
-- pushed to. Secrets are kept (they sign every push) and never listed by
-- the HTTP API.
--
-- No transaction (migrate.go, noTxMarker): the index of attempts is built
-- concurrently; every statement may run again after a crash midway.
CREATE TABLE IF NOT EXISTS {schema}.delivery_targets (
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
-- Built concurrently (writes of attempts go on); the DROP clears what an
-- interrupted build left.
DROP INDEX CONCURRENTLY IF EXISTS {schema}.attempts_delivery_idx;
CREATE INDEX CONCURRENTLY attempts_delivery_idx ON {schema}.attempts (finished_at) WHERE target <> '';

-- Topic subscriptions are targets of a topic, with an event-type filter.
ALTER TABLE {schema}.delivery_targets ADD COLUMN IF NOT EXISTS topic text NOT NULL DEFAULT '';
ALTER TABLE {schema}.delivery_targets ADD COLUMN IF NOT EXISTS event_types jsonb NOT NULL DEFAULT '[]';

-- The event log of the topics (kept 90 days by default, independent of
-- the delivery jobs made from each event).
CREATE TABLE IF NOT EXISTS {schema}.events (
    id            bigserial PRIMARY KEY,
    tenant        text        NOT NULL,
    topic         text        NOT NULL,
    event_key     text        NOT NULL DEFAULT '',
    type          text        NOT NULL DEFAULT '',
    partition_key text        NOT NULL DEFAULT '',
    payload       json        NOT NULL,
    metadata      json,
    deliveries    integer     NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS events_key_idx ON {schema}.events (tenant, topic, event_key) WHERE event_key <> '';
CREATE INDEX IF NOT EXISTS events_topic_idx ON {schema}.events (tenant, topic, id);
CREATE INDEX IF NOT EXISTS events_created_idx ON {schema}.events (created_at);
