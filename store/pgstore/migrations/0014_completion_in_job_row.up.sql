-- 0014: a completion (not a delivery) is no longer written as an attempt
-- row: the completed job row is its record (docs/state-machine.md,
-- "Attempts"). The row keeps the handler's duration for it.
ALTER TABLE {schema}.jobs ADD COLUMN duration_ms bigint NOT NULL DEFAULT 0;
-- A completed job's duration was in its completion's attempt row (before
-- 0014, or kept there by 0014's down step): the row takes it back.
UPDATE {schema}.jobs j SET duration_ms = a.duration_ms
FROM {schema}.attempts a
WHERE j.state = 'completed' AND a.job_id = j.id AND a.attempt = j.attempt
  AND a.outcome IN ('completed', 'cached') AND a.duration_ms <> 0;
