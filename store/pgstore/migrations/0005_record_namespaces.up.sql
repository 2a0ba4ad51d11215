-- 0005: records of the Idempotency-Key middleware and of Client.Do get a
-- key namespace of their own (internal/recordlease.Key): chr(31) + purpose
-- + chr(31) + key. Caller keys are printable ASCII, so a job key can no
-- longer equal a middleware or Do key. Records without a job written by
-- earlier versions move to their namespace: keys starting "http:" (the
-- middleware's default prefix) to 'http', the others to 'do'.
UPDATE {schema}.records SET key = chr(31) || 'http' || chr(31) || key
WHERE job_id IS NULL AND left(key, 5) = 'http:';
UPDATE {schema}.records SET key = chr(31) || 'do' || chr(31) || key
WHERE job_id IS NULL AND left(key, 1) <> chr(31);
