-- 0006: records of the Idempotency-Key middleware and of Client.Do get a
-- key namespace of their own (internal/recordlease.Key): char(31) + purpose
-- + char(31) + key. Caller keys are printable ASCII, so a job key can no
-- longer equal a middleware or Do key. Records without a job written by
-- earlier versions move to their namespace: keys starting "http:" (the
-- middleware's default prefix) to 'http', the others to 'do'.
UPDATE idem_keys SET key = char(31) || 'http' || char(31) || key
WHERE job_id = 0 AND substr(key, 1, 5) = 'http:';
UPDATE idem_keys SET key = char(31) || 'do' || char(31) || key
WHERE job_id = 0 AND substr(key, 1, 1) <> char(31);
