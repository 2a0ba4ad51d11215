-- 0023: a record's cached result expires on its own (CompletedAt + the
-- result TTL), which may come before the record's expiry (the later of
-- that and its dedup window's end): reads stop serving the result then,
-- and the expiry sweep drops its bytes while the record stays for the
-- window. A result stored before this migration keeps the record's expiry:
-- a NULL result_expires_at reads as expires_at, so the records are not
-- rewritten here. The sweep's index holds only the records that outlive
-- their result (none with the defaults, window = result TTL).
ALTER TABLE idem_keys ADD COLUMN result_expires_at INTEGER;
CREATE INDEX idem_keys_result_expires ON idem_keys (result_expires_at)
    WHERE result IS NOT NULL AND (expires_at IS NULL OR result_expires_at < expires_at);
