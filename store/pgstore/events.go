package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/store"
)

// The queries of the events table (the event log of the topics).
const (
	eventCols    = `id, tenant, topic, event_key, type, partition_key, payload::text, metadata::text, created_at, deliveries`
	qEventInsert = `INSERT INTO {schema}.events (tenant, topic, event_key, type, partition_key, payload, metadata, created_at, deliveries)
VALUES ($1, $2, $3, $4, $5, $6::json, $7::json, $8, $9) ON CONFLICT DO NOTHING RETURNING ` + eventCols
	qEventByKey = `SELECT ` + eventCols + ` FROM {schema}.events WHERE tenant = $1 AND topic = $2 AND event_key = $3`
	qEventList  = `SELECT ` + eventCols + ` FROM {schema}.events
WHERE tenant = $1 AND topic = $2 AND id > $9
  AND ($3 = '' OR partition_key = $3)
  AND (cardinality($4::text[]) = 0 OR type = ANY($4::text[]))
  AND ($5 = '' OR ` + qEventMetaMatch + `)
  AND created_at >= $7 AND ($8::timestamptz IS NULL OR created_at < $8)
ORDER BY id LIMIT $10`
	// qEventMetaMatch: the metadata's top-level $5 is the JSON string $6
	// (a number or boolean never matches, as on SQLite). Only the one
	// value is compared as jsonb, not the metadata unescaped to text.
	// Metadata holding a \u0000 escape (refused at publish since; older
	// rows may hold one) cannot be read by PostgreSQL's JSON functions at
	// all (SQLSTATE 22P05), so such an event never matches a filter
	// instead of failing the whole list; the regular expression tells an
	// escape from an escaped backslash followed by "u0000".
	qEventMetaMatch = `CASE WHEN strpos(metadata::text, '\u0000') > 0 AND metadata::text ~ '(^|[^\\])(\\\\)*\\u0000' THEN false
       ELSE (metadata -> $5)::jsonb = to_jsonb($6::text) END`
	qEventDeleteBefore = `DELETE FROM {schema}.events WHERE id IN (
    SELECT id FROM {schema}.events WHERE created_at < $1 ORDER BY created_at LIMIT $2)`
)

// EventInsert implements store.Events.
func (s *Store) EventInsert(ctx context.Context, e *store.Event) (*store.Event, bool, error) {
	if err := store.EventCheck(e); err != nil {
		return nil, false, fmt.Errorf("insert event: %w", err)
	}
	db, err := s.db()
	if err != nil {
		return nil, false, err
	}
	var meta *string
	if len(e.Metadata) > 0 {
		m := string(e.Metadata)
		meta = &m
	}
	ev, err := scanEvent(db.QueryRow(ctx, s.sql(qEventInsert), e.Tenant, e.Topic, e.Key, e.Type, e.PartitionKey,
		string(e.Payload), meta, store.OrNow(e.CreatedAt), e.Deliveries))
	if errors.Is(err, pgx.ErrNoRows) {
		ev, err = scanEvent(db.QueryRow(ctx, s.sql(qEventByKey), e.Tenant, e.Topic, e.Key))
		if err != nil {
			return nil, false, fmt.Errorf("insert event: %w", err)
		}
		return ev, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("insert event: %w", err)
	}
	return ev, false, nil
}

// EventList implements store.Events.
func (s *Store) EventList(ctx context.Context, p *store.EventListParams) ([]*store.Event, error) {
	db, err := s.db()
	if err != nil {
		return nil, err
	}
	types := p.Types
	if types == nil {
		types = []string{}
	}
	var to any
	if !p.To.IsZero() {
		to = p.To
	}
	limit := p.Limit
	if limit <= 0 {
		limit = store.MaxBatch
	}
	rows, err := db.Query(ctx, s.sql(qEventList), p.Tenant, p.Topic, p.PartitionKey, types, p.MetaKey, p.MetaValue,
		p.From, to, p.AfterID, limit)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
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
	db, err := s.db()
	if err != nil {
		return 0, err
	}
	tag, err := db.Exec(ctx, s.sql(qEventDeleteBefore), p.Before, limit)
	if err != nil {
		return 0, fmt.Errorf("delete events: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// scanEvent reads one events row.
func scanEvent(row pgx.Row) (*store.Event, error) {
	var e store.Event
	var payload string
	var meta *string
	if err := row.Scan(&e.ID, &e.Tenant, &e.Topic, &e.Key, &e.Type, &e.PartitionKey, &payload, &meta, &e.CreatedAt, &e.Deliveries); err != nil {
		return nil, err
	}
	e.Payload = json.RawMessage(payload)
	if meta != nil {
		e.Metadata = json.RawMessage(*meta)
	}
	e.CreatedAt = utc(e.CreatedAt)
	return &e, nil
}
