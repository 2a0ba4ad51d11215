package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// The queries of the delivery_targets table.
const (
	targetCols = `tenant, name, queue, kind, url, secrets, timeout_ms, created_at, updated_at, topic, event_types, max_attempts`
	// qTargetPut inserts or replaces a target ($11: keep the stored secrets
	// on a replace; $12: max_attempts); xmax = 0 marks an insert. A
	// row of another topic (a subscription for a plain target, or the
	// reverse) is not replaced: no row is returned.
	qTargetPut = `INSERT INTO {schema}.delivery_targets AS d (` + targetCols + `)
VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $8, $9, $10::jsonb, $12)
ON CONFLICT (tenant, name) DO UPDATE SET queue = excluded.queue, kind = excluded.kind,
    url = excluded.url, secrets = CASE WHEN $11::boolean THEN d.secrets ELSE excluded.secrets END,
    timeout_ms = excluded.timeout_ms,
    updated_at = excluded.updated_at, topic = excluded.topic, event_types = excluded.event_types,
    max_attempts = excluded.max_attempts
    WHERE d.topic = excluded.topic
RETURNING (xmax = 0)`
	qTargetList   = `SELECT ` + targetCols + ` FROM {schema}.delivery_targets WHERE ($1 = '' OR tenant = $1) ORDER BY tenant, name`
	qTargetDelete = `DELETE FROM {schema}.delivery_targets WHERE tenant = $1 AND name = $2`
	// qAttemptDeliveryList: $1 tenant ("" = all), $2 since, $3 limit; the
	// attempt's columns (as scanAttempt reads them) and its job's tenant. A
	// job's delete deletes its attempts, so the join loses none.
	qAttemptDeliveryList = `SELECT a.job_id, a.attempt, a.started_at, a.finished_at, a.duration_ms, a.outcome, a.error,
    a.worker_id, a.target, a.http_status, j.tenant
FROM {schema}.attempts a JOIN {schema}.jobs j ON j.id = a.job_id
WHERE a.target <> '' AND a.finished_at >= $2 AND ($1 = '' OR j.tenant = $1)
ORDER BY a.finished_at DESC LIMIT $3`
)

// AttemptDeliveryList implements store.Targets.
func (s *Store) AttemptDeliveryList(ctx context.Context, p *store.AttemptDeliveryListParams) ([]*store.DeliveryAttempt, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = store.MaxBatch
	}
	db, err := s.db()
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, s.sql(qAttemptDeliveryList), p.Tenant, p.Since, limit)
	if err != nil {
		return nil, fmt.Errorf("list delivery attempts: %w", err)
	}
	out, err := collect(rows, scanDeliveryAttempt)
	if err != nil {
		return nil, fmt.Errorf("list delivery attempts: %w", err)
	}
	return out, nil
}

// TargetPut implements store.Targets.
func (s *Store) TargetPut(ctx context.Context, t *store.DeliveryTarget) (bool, error) {
	secrets, types, err := store.TargetCheck(t)
	if err != nil {
		return false, fmt.Errorf("put target: %w", err)
	}
	db, err := s.db()
	if err != nil {
		return false, err
	}
	var created bool
	err = db.QueryRow(ctx, s.sql(qTargetPut), t.Tenant, t.Name, t.Queue, t.Kind, t.URL, secrets,
		t.Timeout.Milliseconds(), store.OrNow(t.UpdatedAt), t.Topic, types, t.KeepSecrets, t.MaxAttempts).Scan(&created)
	if errors.Is(err, pgx.ErrNoRows) {
		err = store.TargetNameTaken(t)
	}
	if err != nil {
		return false, fmt.Errorf("put target: %w", err)
	}
	return created, nil
}

// TargetList implements store.Targets.
func (s *Store) TargetList(ctx context.Context, p *store.TargetListParams) ([]*store.DeliveryTarget, error) {
	db, err := s.db()
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, s.sql(qTargetList), p.Tenant)
	if err != nil {
		return nil, fmt.Errorf("list targets: %w", err)
	}
	out, err := collect(rows, scanTarget)
	if err != nil {
		return nil, fmt.Errorf("list targets: %w", err)
	}
	return out, nil
}

// TargetDelete implements store.Targets.
func (s *Store) TargetDelete(ctx context.Context, p *store.TargetDeleteParams) error {
	db, err := s.db()
	if err != nil {
		return err
	}
	tag, err := db.Exec(ctx, s.sql(qTargetDelete), p.Tenant, p.Name)
	if err != nil {
		return fmt.Errorf("delete target: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete target %q: %w", p.Name, idemtype.ErrNotFound)
	}
	return nil
}

// scanTarget reads one delivery_targets row.
func scanTarget(row pgx.Row) (*store.DeliveryTarget, error) {
	var t store.DeliveryTarget
	var secrets, types []byte
	var timeoutMS int64
	if err := row.Scan(&t.Tenant, &t.Name, &t.Queue, &t.Kind, &t.URL, &secrets, &timeoutMS, &t.CreatedAt, &t.UpdatedAt, &t.Topic, &types, &t.MaxAttempts); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(types, &t.EventTypes); err != nil {
		return nil, fmt.Errorf("target %q event types: %w", t.Name, err)
	}
	if err := json.Unmarshal(secrets, &t.Secrets); err != nil {
		return nil, fmt.Errorf("target %q secrets: %w", t.Name, err)
	}
	t.Timeout = time.Duration(timeoutMS) * time.Millisecond
	t.CreatedAt, t.UpdatedAt = utc(t.CreatedAt), utc(t.UpdatedAt)
	return &t, nil
}

// scanDeliveryAttempt reads one row of qAttemptDeliveryList: an attempt's
// columns, then its job's tenant.
func scanDeliveryAttempt(row pgx.Row) (*store.DeliveryAttempt, error) {
	var d store.DeliveryAttempt
	a, err := scanAttemptThen(row, &d.Tenant)
	if err != nil {
		return nil, err
	}
	d.Attempt = *a
	return &d, nil
}
