-- 0027 changed nothing on PostgreSQL.
SELECT 1;
