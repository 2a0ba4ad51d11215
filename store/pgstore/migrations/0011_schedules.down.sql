ALTER TABLE {schema}.jobs DROP COLUMN timeout_us;
DROP TABLE {schema}.schedules;
