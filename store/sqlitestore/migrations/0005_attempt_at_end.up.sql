-- 0005: an attempt is stored as a row once, when it ends; the current
-- attempt of a running job is read from the job row. Rows of running
-- attempts written by earlier versions (at claim) are removed, or their
-- attempt would be listed twice and written again at its end.
DELETE FROM attempts
WHERE outcome = 'running' AND finished_at IS NULL
  AND job_id IN (SELECT id FROM jobs WHERE state = 'running');
