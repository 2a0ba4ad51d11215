-- 0027: the partial indexes whose predicates listed three or more states
-- (state IN ('a', 'b', 'c')) spell them as chains of ORs. SQLite evaluates
-- the predicate of every partial index for each row inserted and for the
-- old and new row of each update, and outside a WHERE clause an IN list of
-- three or more constants builds a temporary B-tree every time: three per
-- job inserted, more per claim and finish. The statements that read these
-- indexes repeat the predicates in the same form (queries.go, stateIn), as
-- the planner uses a partial index only for a query whose WHERE implies its
-- predicate term for term. jobs_partition_head was rebuilt in this form by
-- 0026. Rebuilding the two indexes reads the jobs table once each (seconds
-- for a million jobs), inside the migration's transaction.
DROP INDEX jobs_claim_tenant;
CREATE INDEX jobs_claim_tenant ON jobs (queue, tenant, priority DESC, run_at, id)
    WHERE (state = 'available' OR state = 'scheduled' OR state = 'retryable');
DROP INDEX jobs_finished;
CREATE INDEX jobs_finished ON jobs (state, finished_at)
    WHERE (state = 'completed' OR state = 'dead' OR state = 'cancelled');
