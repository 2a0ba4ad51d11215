-- 0021 is a no-op in PostgreSQL (see 0021_event_seq.up.sql).
SELECT 1;
