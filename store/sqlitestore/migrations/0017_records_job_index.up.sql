-- 0017: PostgreSQL drops its index of records by job id (retention finds a
-- job's record by the job's key). The SQLite store never had one: nothing
-- to do; the number is kept so both stores count migrations alike.
SELECT 1;
