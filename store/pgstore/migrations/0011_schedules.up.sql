-- Schedules, stored so that every node sees them. spec is the schedule's
-- definition as JSON, owned by the runtime (package idem); the store keeps
-- it byte for byte (text, not jsonb). last_fired_at is the newest scheduled
-- firing that was enqueued: it only moves forward. Deleting a schedule never
-- touches the jobs it made.
CREATE TABLE {schema}.schedules (
  tenant        text        NOT NULL,
  name          text        NOT NULL,
  spec          text        NOT NULL,
  created_at    timestamptz NOT NULL,
  updated_at    timestamptz NOT NULL,
  last_fired_at timestamptz,
  last_job_id   bigint,
  PRIMARY KEY (tenant, name)
);

-- A job's own timeout (microseconds; 0 = the queue's or kind's): the
-- deadline of each attempt's handler and the cap of a pull worker's lease.
ALTER TABLE {schema}.jobs ADD COLUMN timeout_us bigint NOT NULL DEFAULT 0;
