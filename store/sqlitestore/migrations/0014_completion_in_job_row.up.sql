-- 0014: a completion (not a delivery) is no longer written as an attempt
-- row: the completed job row is its record (docs/state-machine.md,
-- "Attempts"). The row keeps the handler's duration for it.
ALTER TABLE jobs ADD COLUMN duration_ms INTEGER NOT NULL DEFAULT 0;
-- A completed job's duration was in its completion's attempt row (before
-- 0014): the row takes it back.
UPDATE jobs SET duration_ms = (SELECT a.duration_ms FROM attempts a
    WHERE a.job_id = jobs.id AND a.attempt = jobs.attempt AND a.outcome IN ('completed', 'cached')
      AND a.duration_ms <> 0 ORDER BY a.id DESC LIMIT 1)
WHERE state = 'completed' AND EXISTS (SELECT 1 FROM attempts a
    WHERE a.job_id = jobs.id AND a.attempt = jobs.attempt AND a.outcome IN ('completed', 'cached')
      AND a.duration_ms <> 0);
