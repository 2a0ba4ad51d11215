-- 0021: SQLite adds event_seq, the event id high-water mark, so that ids
-- deleted by retention are not given again. PostgreSQL's events.id is a
-- bigserial, whose sequence never gives an id twice: nothing to do; the
-- number is kept so both stores count migrations alike.
SELECT 1;
