DROP TABLE {schema}.schedules;
