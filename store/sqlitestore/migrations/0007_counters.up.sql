-- 0006: named per-tenant counters (cache hits and misses) shared by every
-- process on the file.
CREATE TABLE IF NOT EXISTS counters (
    tenant TEXT    NOT NULL,
    name   TEXT    NOT NULL,
    value  INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, name)
) WITHOUT ROWID;
