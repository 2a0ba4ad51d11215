-- 0020: PostgreSQL adds flow_known, the tenants each process holds
-- reserved rate budget for under default limits. SQLite claims through one
-- writer and never reserves: nothing to do; the number is kept so both
-- stores count migrations alike.
SELECT 1;
