-- Autovacuum tuned for a queue: every claim and every finish leaves a dead
-- version of a jobs row, and a claimed job's entry in the partial
-- jobs_claim_idx stays in the index until a vacuum removes it. Claims scan
-- that index in (queue, priority, run_at, id) order, where the jobs claimed
-- last sit in front of the ones still available, so each claim reads every
-- entry claimed since the last vacuum (measured: 689 index pages for a claim
-- of 100 after one round of 100,000 jobs, against 6 on an empty history;
-- BenchmarkHistoryRounds). The defaults wait for 20% of the table to be dead
-- (200,000 rows once a million jobs finished) and throttle the vacuum, so the
-- dead entries only grow with the history.
--
-- Here the thresholds are fixed row counts, not fractions of the table, and
-- the vacuum of these tables is not throttled: jobs is vacuumed at every
-- autovacuum round (autovacuum_naptime, 1 minute by default) in which it saw
-- 10,000 updates, whatever the size of the finished history. Analyze follows
-- the mix of states, which the claim and retention plans depend on.
--
-- vacuum_index_cleanup = on: by default a vacuum skips the indexes when
-- fewer than 2% of the heap pages hold dead rows, which is always the case
-- once the finished history is large (a minute of claims touches a few
-- hundred pages of a table of tens of thousands); it would then leave every
-- dead entry in jobs_claim_idx for the claims to read.
ALTER TABLE {schema}.jobs SET (
    vacuum_index_cleanup = on,
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 10000,
    autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_insert_threshold = 50000,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 0
);

-- Records are updated at finish (keyed jobs) and deleted by retention.
ALTER TABLE {schema}.records SET (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 10000,
    autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_insert_threshold = 50000,
    autovacuum_vacuum_cost_delay = 0
);

-- Attempts are only inserted and deleted: an insert-driven vacuum keeps the
-- visibility map current for the index-only scans of attempts_finished_idx.
ALTER TABLE {schema}.attempts SET (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 10000,
    autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_insert_threshold = 50000,
    autovacuum_vacuum_cost_delay = 0
);
