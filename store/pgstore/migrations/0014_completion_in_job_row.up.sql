-- 0014: a completion (not a delivery) is no longer written as an attempt
-- row: the completed job row is its record (docs/state-machine.md,
-- "Attempts"). The row keeps the handler's duration for it.
ALTER TABLE {schema}.jobs ADD COLUMN duration_ms bigint NOT NULL DEFAULT 0;
