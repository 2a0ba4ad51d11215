-- 0001: the initial idem schema.
-- Times are INTEGER unix microseconds (UTC); JSON is stored as BLOB.

CREATE TABLE jobs (
    id               INTEGER PRIMARY KEY, -- allocated by the store, see 0002
    tenant           TEXT    NOT NULL,
    queue            TEXT    NOT NULL,
    kind             TEXT    NOT NULL,
    args             BLOB    NOT NULL,
    state            TEXT    NOT NULL,
    priority         INTEGER NOT NULL DEFAULT 0,
    attempt          INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL,
    run_at           INTEGER NOT NULL,
    created_at       INTEGER NOT NULL,
    started_at       INTEGER,
    finished_at      INTEGER,
    partition_key    TEXT    NOT NULL DEFAULT '',
    idempotency_key  TEXT    NOT NULL DEFAULT '',
    depends_on       TEXT,              -- comma-separated copy of job_deps, for reads
    result           BLOB,
    was_cached       INTEGER NOT NULL DEFAULT 0,
    original_job_id  INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT    NOT NULL DEFAULT '',
    metadata         BLOB,
    lease_token      TEXT    NOT NULL DEFAULT '', -- kept after the attempt ends (repeat completion check)
    lease_expires_at INTEGER,
    worker_id        TEXT    NOT NULL DEFAULT '',
    dedup_window_us  INTEGER NOT NULL DEFAULT 0,
    result_ttl_us    INTEGER NOT NULL DEFAULT 0
);

-- Claims: claimable jobs per queue in claim order.
CREATE INDEX jobs_claim ON jobs (queue, priority DESC, run_at, id)
    WHERE state IN ('available', 'scheduled', 'retryable');

-- FIFO head check: unfinished jobs of a partition.
CREATE INDEX jobs_partition_head ON jobs (queue, partition_key, id)
    WHERE partition_key <> '' AND state IN ('pending', 'scheduled', 'available', 'running', 'retryable');

-- Lists: newest first per tenant.
CREATE INDEX jobs_tenant_id ON jobs (tenant, id DESC);

-- Rescuer: running jobs by lease expiry.
CREATE INDEX jobs_running_lease ON jobs (lease_expires_at) WHERE state = 'running';

-- Promoter: delayed jobs by run_at.
CREATE INDEX jobs_delayed ON jobs (run_at) WHERE state IN ('scheduled', 'retryable');

-- Retention: finished jobs by state and finish time.
CREATE INDEX jobs_finished ON jobs (state, finished_at) WHERE state IN ('completed', 'dead', 'cancelled');

CREATE TABLE job_deps (
    job_id        INTEGER NOT NULL,
    depends_on_id INTEGER NOT NULL,
    PRIMARY KEY (job_id, depends_on_id)
) WITHOUT ROWID;

-- Dependants of a job.
CREATE INDEX job_deps_dependants ON job_deps (depends_on_id, job_id);

CREATE TABLE attempts (
    id          INTEGER PRIMARY KEY,
    job_id      INTEGER NOT NULL,
    attempt     INTEGER NOT NULL,
    started_at  INTEGER NOT NULL,
    finished_at INTEGER,
    duration_ms INTEGER NOT NULL DEFAULT 0,
    outcome     TEXT    NOT NULL,
    error       TEXT    NOT NULL DEFAULT '',
    worker_id   TEXT    NOT NULL DEFAULT '',
    target      TEXT    NOT NULL DEFAULT '',
    http_status INTEGER NOT NULL DEFAULT 0
);

CREATE INDEX attempts_job ON attempts (job_id, id);
CREATE INDEX attempts_finished ON attempts (finished_at) WHERE finished_at IS NOT NULL;

CREATE TABLE idem_keys (
    tenant        TEXT    NOT NULL,
    key           TEXT    NOT NULL,
    status        TEXT    NOT NULL,
    fingerprint   TEXT    NOT NULL DEFAULT '',
    job_id        INTEGER NOT NULL DEFAULT 0,
    result_job_id INTEGER NOT NULL DEFAULT 0,
    result        BLOB,
    result_hash   TEXT    NOT NULL DEFAULT '',
    size_bytes    INTEGER NOT NULL DEFAULT 0,
    compressed    INTEGER NOT NULL DEFAULT 0,
    lease_owner   TEXT    NOT NULL DEFAULT '',
    lease_until   INTEGER,
    created_at    INTEGER NOT NULL,
    completed_at  INTEGER,
    dedup_until   INTEGER,
    expires_at    INTEGER,
    duration_ms   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, key)
) WITHOUT ROWID;

CREATE INDEX idem_keys_expires ON idem_keys (expires_at) WHERE expires_at IS NOT NULL;

CREATE TABLE leaders (
    name       TEXT    PRIMARY KEY,
    owner      TEXT    NOT NULL,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE api_keys (
    seq        INTEGER PRIMARY KEY,
    id         TEXT    NOT NULL UNIQUE,
    hash       TEXT    NOT NULL,
    tenant     TEXT    NOT NULL,
    admin      INTEGER NOT NULL DEFAULT 0,
    name       TEXT    NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
);

CREATE INDEX api_keys_hash ON api_keys (hash);
