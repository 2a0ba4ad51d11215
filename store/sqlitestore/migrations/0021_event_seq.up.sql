-- 0021: the event id high-water mark. events.id is an INTEGER PRIMARY KEY
-- without AUTOINCREMENT, which gives max(id) + 1: once retention had
-- deleted the newest events their ids came back, and the delivery key
-- "event-<id>/<subscription>" of a new event collided with the delivery job
-- of the old one (the publish failed, or a receiver deduplicating on
-- webhook-id dropped the event). The store now gives an event the id
-- max(max(events.id), event_seq.seq) + 1, and raises event_seq.seq to
-- max(events.id) before retention deletes events, so an id is never given
-- twice. The seed covers the ids already deleted whose delivery jobs are
-- still kept (their keys name the event id).
CREATE TABLE event_seq (
    id  INTEGER PRIMARY KEY CHECK (id = 1),
    seq INTEGER NOT NULL
);
INSERT INTO event_seq (id, seq) SELECT 1, max(
    COALESCE((SELECT max(id) FROM events), 0),
    COALESCE((SELECT max(CAST(substr(idempotency_key, 7, instr(idempotency_key, '/') - 7) AS INTEGER))
              FROM jobs WHERE idempotency_key LIKE 'event-%/%'), 0));
