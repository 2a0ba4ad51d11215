-- 0023: a record's cached result expires on its own (CompletedAt + the
-- result TTL), which may come before the record's expiry (the later of
-- that and its dedup window's end): reads stop serving the result then,
-- and the expiry sweep drops its bytes while the record stays for the
-- window. A result stored before this migration kept the record's expiry.
ALTER TABLE idem_keys ADD COLUMN result_expires_at INTEGER;
UPDATE idem_keys SET result_expires_at = expires_at WHERE status = 'completed';
CREATE INDEX idem_keys_result_expires ON idem_keys (result_expires_at) WHERE result IS NOT NULL;
