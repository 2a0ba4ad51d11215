ALTER TABLE {schema}.jobs RESET (fillfactor);
DELETE FROM {schema}.attempts a WHERE NOT EXISTS (SELECT 1 FROM {schema}.jobs j WHERE j.id = a.job_id);
ALTER TABLE {schema}.attempts ADD CONSTRAINT attempts_job_id_fkey
    FOREIGN KEY (job_id) REFERENCES {schema}.jobs (id) ON DELETE CASCADE;
ALTER TABLE {schema}.attempts DROP CONSTRAINT attempts_pkey;
ALTER TABLE {schema}.attempts ADD PRIMARY KEY (id);
CREATE INDEX attempts_job_idx ON {schema}.attempts (job_id, id);
-- Running jobs get back the attempt row version 3 wrote at claim.
INSERT INTO {schema}.attempts (job_id, attempt, started_at, outcome, worker_id)
SELECT id, attempt, started_at, 'running', worker_id FROM {schema}.jobs
WHERE state = 'running' AND started_at IS NOT NULL ORDER BY id;
