-- Attempt rows are written once, when the attempt ends (finish, rescue,
-- release, cancel); a running attempt is read from its job row. The
-- 'running' rows version 3 wrote at claim are removed: the job row shows
-- those attempts now, and the statement that ends one inserts its row.
DELETE FROM {schema}.attempts a USING {schema}.jobs j
WHERE a.outcome = 'running' AND j.id = a.job_id AND j.state = 'running' AND a.attempt = j.attempt;

-- One index instead of two: (job_id, id) serves AttemptList and the
-- deletes by job; nothing looks an attempt up by id alone.
ALTER TABLE {schema}.attempts DROP CONSTRAINT attempts_pkey;
DROP INDEX IF EXISTS {schema}.attempts_job_idx;
ALTER TABLE {schema}.attempts ADD PRIMARY KEY (job_id, id);

-- No foreign key: its check (one locking lookup of the job per inserted
-- row) ran inside the batched finish, the serial part of the work path.
-- Attempt rows are only inserted from the job row they belong to, in the
-- statement that updates it, and the job deletes delete them
-- (qJobDelete, qDeleteFinished).
ALTER TABLE {schema}.attempts DROP CONSTRAINT attempts_job_id_fkey;

-- Room on each page for the next version of a row (claim, heartbeat,
-- finish update jobs in place).
ALTER TABLE {schema}.jobs SET (fillfactor = 90);
