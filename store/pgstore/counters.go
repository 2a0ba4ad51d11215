package pgstore

import (
	"context"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/store"
)

const (
	qCounterAdd = `INSERT INTO {schema}.counters (tenant, name, value) VALUES ($1, $2, $3)
ON CONFLICT (tenant, name) DO UPDATE SET value = {schema}.counters.value + excluded.value`
	qCounterGet    = `SELECT name, value FROM {schema}.counters WHERE tenant = $1`
	qCounterGetAll = `SELECT name, sum(value)::bigint FROM {schema}.counters GROUP BY name`
)

// CounterAdd implements store.Counters. Names are written in sorted order
// so concurrent adders lock rows in the same order.
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
	err := s.tx(ctx, func(tx pgx.Tx) error {
		for _, n := range names {
			if _, err := tx.Exec(ctx, s.sql(qCounterAdd), tenant, n, deltas[n]); err != nil {
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
	db, err := s.db()
	if err != nil {
		return nil, err
	}
	q, args := qCounterGet, []any{tenant}
	if tenant == "" {
		q, args = qCounterGetAll, nil
	}
	rows, err := db.Query(ctx, s.sql(q), args...)
	if err != nil {
		return nil, fmt.Errorf("get counters: %w", err)
	}
	out := map[string]int64{}
	var n string
	var v int64
	if _, err := pgx.ForEachRow(rows, []any{&n, &v}, func() error { out[n] = v; return nil }); err != nil {
		return nil, fmt.Errorf("get counters: %w", err)
	}
	return out, nil
}
