package sqlitestore

import (
	"context"
	"fmt"
	"sort"

	"github.com/idem-dev/idem/store"
)

const (
	qCounterAdd = `INSERT INTO counters (tenant, name, value) VALUES (?, ?, ?)
ON CONFLICT (tenant, name) DO UPDATE SET value = value + excluded.value`
	qCounterGet    = `SELECT name, value FROM counters WHERE tenant = ?`
	qCounterGetAll = `SELECT name, sum(value) FROM counters GROUP BY name`
)

// CounterAdd implements store.Counters.
func (s *Store) CounterAdd(ctx context.Context, p *store.CounterAddParams) error {
	tenant, deltas := p.Tenant, p.Deltas
	if len(deltas) == 0 {
		return nil
	}
	names := make([]string, 0, len(deltas))
	for n := range deltas {
		names = append(names, n)
	}
	sort.Strings(names)
	err := s.write(ctx, len(names), func(t *wtx) error {
		for _, n := range names {
			if _, err := t.exec(qCounterAdd, tenant, n, deltas[n]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("add counters: %w", err)
	}
	return nil
}

// CounterGet implements store.Counters.
func (s *Store) CounterGet(ctx context.Context, p *store.CounterGetParams) (map[string]int64, error) {
	tenant := p.Tenant
	q, args := qCounterGet, []any{tenant}
	if tenant == "" {
		q, args = qCounterGetAll, nil
	}
	rows, err := s.readRows(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("get counters: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var n string
		var v int64
		if err := rows.Scan(&n, &v); err != nil {
			return nil, fmt.Errorf("get counters: %w", err)
		}
		out[n] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("get counters: %w", s.readErr(err))
	}
	return out, nil
}
