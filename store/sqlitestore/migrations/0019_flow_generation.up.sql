-- 0019: PostgreSQL adds flow_generation, a counter of limit definition
-- changes, for claims that spend rate budget reserved in advance. SQLite
-- claims through one writer and never reserves: nothing to do; the number
-- is kept so both stores count migrations alike.
SELECT 1;
