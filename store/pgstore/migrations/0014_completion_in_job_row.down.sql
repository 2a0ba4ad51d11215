-- Completions stored only in job rows get their attempt rows back.
INSERT INTO {schema}.attempts (job_id, attempt, started_at, finished_at, duration_ms, outcome, error, worker_id)
SELECT j.id, j.attempt, j.started_at, j.finished_at, j.duration_ms,
    CASE WHEN j.was_cached THEN 'cached' ELSE 'completed' END, '', j.worker_id
FROM {schema}.jobs j
WHERE j.state = 'completed' AND j.started_at IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM {schema}.attempts a WHERE a.job_id = j.id AND a.outcome IN ('completed', 'cached'));
ALTER TABLE {schema}.jobs DROP COLUMN duration_ms;
