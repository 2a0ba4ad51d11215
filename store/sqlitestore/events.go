package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/idem-dev/idem/store"
)

// The queries of the events table (the event log of the topics).
const (
	eventCols = `id, tenant, topic, event_key, type, partition_key, payload, metadata, created_at, deliveries`
	// qEventInsert gives the event the id max(max(events.id),
	// event_seq.seq) + 1, never the id of an event retention deleted
	// (migration 0021): its delivery jobs, keyed by it, may still exist.
	qEventInsert = `INSERT INTO events (id, tenant, topic, event_key, type, partition_key, payload, metadata, created_at, deliveries)
VALUES (max(COALESCE((SELECT max(id) FROM events), 0), COALESCE((SELECT seq FROM event_seq WHERE id = 1), 0)) + 1,
    ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING ` + eventCols
	// qEventSeqRaise keeps the newest id before retention deletes events.
	qEventSeqRaise = `UPDATE event_seq SET seq = max(seq, COALESCE((SELECT max(id) FROM events), 0)) WHERE id = 1`
	qEventByKey    = `SELECT ` + eventCols + ` FROM events WHERE tenant = ? AND topic = ? AND event_key = ?`
	// qEventList: ?1 tenant, ?2 topic, ?3 partition key, ?4 types (JSON
	// array), ?5 metadata path, ?6 metadata value (matched only by a JSON
	// string, not by an object or array of the same text), ?7 from, ?8 to (0 = none),
	// ?9 after id, ?10 limit.
	qEventList = `SELECT ` + eventCols + ` FROM events
WHERE tenant = ?1 AND topic = ?2 AND id > ?9
  AND (?3 = '' OR partition_key = ?3)
  AND (?4 = '[]' OR type IN (SELECT value FROM json_each(?4)))
  AND (?5 = '' OR (json_type(metadata, ?5) = 'text' AND json_extract(metadata, ?5) = ?6))
  AND created_at >= ?7 AND (?8 = 0 OR created_at < ?8)
ORDER BY id LIMIT ?10`
	qEventDeleteBefore = `DELETE FROM events WHERE id IN (SELECT id FROM events WHERE created_at < ? ORDER BY created_at LIMIT ?)`
)

// EventInsert implements store.Events.
func (s *Store) EventInsert(ctx context.Context, e *store.Event) (*store.Event, bool, error) {
	if err := store.EventCheck(e); err != nil {
		return nil, false, fmt.Errorf("insert event: %w", err)
	}
	var out *store.Event
	existing := false
	err := s.write(ctx, 1, func(w *wtx) error {
		existing = false // the writer may run a group twice (savepoint retry)
		ev, err := scanEvent(w.queryRow(qEventInsert, e.Tenant, e.Topic, e.Key, e.Type, e.PartitionKey,
			string(e.Payload), nullJSON(e.Metadata), toUS(store.OrNow(e.CreatedAt)), e.Deliveries))
		if errors.Is(err, sql.ErrNoRows) {
			existing = true
			ev, err = scanEvent(w.queryRow(qEventByKey, e.Tenant, e.Topic, e.Key))
		}
		out = ev
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("insert event: %w", err)
	}
	return out, existing, nil
}

// EventList implements store.Events.
func (s *Store) EventList(ctx context.Context, p *store.EventListParams) ([]*store.Event, error) {
	types, _ := json.Marshal(p.Types)
	if len(p.Types) == 0 {
		types = []byte("[]")
	}
	path := ""
	if p.MetaKey != "" {
		k, _ := json.Marshal(p.MetaKey)
		path = "$." + string(k)
	}
	var to int64
	if !p.To.IsZero() {
		to = toUS(p.To)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = store.MaxBatch
	}
	rows, err := s.readRows(ctx, qEventList, p.Tenant, p.Topic, p.PartitionKey, string(types), path, p.MetaValue,
		toUS(p.From), to, p.AfterID, limit)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", s.readErr(err))
	}
	out, err := collect(rows, scanEvent)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	return out, nil
}

// EventDeleteBefore implements store.Maintenance.
func (s *Store) EventDeleteBefore(ctx context.Context, p *store.EventDeleteBeforeParams) (int, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = store.MaxBatch
	}
	var n int64
	err := s.write(ctx, 1, func(w *wtx) error {
		if _, err := w.exec(qEventSeqRaise); err != nil {
			return err
		}
		res, err := w.exec(qEventDeleteBefore, toUS(p.Before), limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("delete events: %w", err)
	}
	return int(n), nil
}

// scanEvent reads one events row.
func scanEvent(sc scanner) (*store.Event, error) {
	var e store.Event
	var payload string
	var meta sql.NullString
	var created int64
	if err := sc.Scan(&e.ID, &e.Tenant, &e.Topic, &e.Key, &e.Type, &e.PartitionKey, &payload, &meta, &created, &e.Deliveries); err != nil {
		return nil, err
	}
	e.Payload = json.RawMessage(payload)
	if meta.Valid {
		e.Metadata = json.RawMessage(meta.String)
	}
	e.CreatedAt = fromUS(created)
	return &e, nil
}

// nullJSON stores empty JSON as NULL.
func nullJSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}
