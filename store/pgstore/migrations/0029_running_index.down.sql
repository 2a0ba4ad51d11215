-- 0029 changed nothing on PostgreSQL.
SELECT 1;
