-- 0006: schedules, stored so that every node sees them. spec is the
-- schedule's definition as JSON, owned by the runtime (package idem); the
-- store keeps it byte for byte. last_fired_at is the newest scheduled firing
-- that was enqueued: it only moves forward. Deleting a schedule never
-- touches the jobs it made.
CREATE TABLE schedules (
  tenant        TEXT    NOT NULL,
  name          TEXT    NOT NULL,
  spec          TEXT    NOT NULL,
  created_at    INTEGER NOT NULL,
  updated_at    INTEGER NOT NULL,
  last_fired_at INTEGER,
  last_job_id   INTEGER,
  PRIMARY KEY (tenant, name)
) WITHOUT ROWID;

-- A job's own timeout (microseconds; 0 = the queue's or kind's): the
-- deadline of each attempt's handler and the cap of a pull worker's lease.
ALTER TABLE jobs ADD COLUMN timeout_us INTEGER NOT NULL DEFAULT 0;
