package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// The queries of the delivery_targets table.
const (
	targetCols = `tenant, name, queue, kind, url, secrets, timeout_ms, created_at, updated_at, topic, event_types, max_attempts`
	// qTargetPut inserts or replaces a target; created_at is kept on a
	// replace, and the stored secrets too when the 13th parameter
	// (KeepSecrets) is true. TargetPut reads the row first (qTargetTopic): "created" is
	// whether there was none (not created_at = updated_at, which also holds
	// for a replace in the same microsecond), and a row of another topic
	// is not replaced.
	qTargetPut = `INSERT INTO delivery_targets (` + targetCols + `)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (tenant, name) DO UPDATE SET queue = excluded.queue, kind = excluded.kind,
    url = excluded.url, secrets = CASE WHEN ? THEN delivery_targets.secrets ELSE excluded.secrets END,
    timeout_ms = excluded.timeout_ms,
    updated_at = excluded.updated_at, topic = excluded.topic, event_types = excluded.event_types,
    max_attempts = excluded.max_attempts`
	qTargetTopic  = `SELECT topic FROM delivery_targets WHERE tenant = ? AND name = ?`
	qTargetList   = `SELECT ` + targetCols + ` FROM delivery_targets WHERE (? = '' OR tenant = ?) ORDER BY tenant, name`
	qTargetDelete = `DELETE FROM delivery_targets WHERE tenant = ? AND name = ?`
	// qAttemptDeliveryList: ?1 tenant ("" = all), ?2 since, ?3 limit; the
	// attempt's columns (attemptCols) and its job's tenant. A job's delete
	// deletes its attempts, so the join loses none.
	qAttemptDeliveryList = `SELECT a.job_id, a.attempt, a.started_at, a.finished_at, a.duration_ms, a.outcome, a.error,
    a.worker_id, a.target, a.http_status, j.tenant
FROM attempts a JOIN jobs j ON j.id = a.job_id
WHERE a.target <> '' AND a.finished_at >= ?2 AND (?1 = '' OR j.tenant = ?1)
ORDER BY a.finished_at DESC LIMIT ?3`
)

// AttemptDeliveryList implements store.Targets.
func (s *Store) AttemptDeliveryList(ctx context.Context, p *store.AttemptDeliveryListParams) ([]*store.DeliveryAttempt, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = store.MaxBatch
	}
	rows, err := s.readRows(ctx, qAttemptDeliveryList, p.Tenant, toUS(p.Since), limit)
	if err != nil {
		return nil, fmt.Errorf("list delivery attempts: %w", s.readErr(err))
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
	now := toUS(store.OrNow(t.UpdatedAt))
	var created bool
	err = s.write(ctx, 1, func(w *wtx) error {
		var topic string
		switch err := w.queryRow(qTargetTopic, t.Tenant, t.Name).Scan(&topic); {
		case errors.Is(err, sql.ErrNoRows):
			created = true
		case err != nil:
			return err
		case topic != t.Topic:
			return store.TargetNameTaken(t)
		default:
			created = false // the writer may run a group twice
		}
		_, err := w.exec(qTargetPut, t.Tenant, t.Name, t.Queue, t.Kind, t.URL, secrets,
			t.Timeout.Milliseconds(), now, now, t.Topic, types, t.MaxAttempts, t.KeepSecrets)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("put target: %w", err)
	}
	return created, nil
}

// TargetList implements store.Targets.
func (s *Store) TargetList(ctx context.Context, p *store.TargetListParams) ([]*store.DeliveryTarget, error) {
	rows, err := s.readRows(ctx, qTargetList, p.Tenant, p.Tenant)
	if err != nil {
		return nil, fmt.Errorf("list targets: %w", s.readErr(err))
	}
	out, err := collect(rows, scanTarget)
	if err != nil {
		return nil, fmt.Errorf("list targets: %w", err)
	}
	return out, nil
}

// TargetDelete implements store.Targets.
func (s *Store) TargetDelete(ctx context.Context, p *store.TargetDeleteParams) error {
	err := s.write(ctx, 1, func(w *wtx) error {
		res, err := w.exec(qTargetDelete, p.Tenant, p.Name)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("target %q: %w", p.Name, idemtype.ErrNotFound)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete target: %w", err)
	}
	return nil
}

// scanTarget reads one delivery_targets row.
func scanTarget(rows scanner) (*store.DeliveryTarget, error) {
	var t store.DeliveryTarget
	var secrets, types string
	var timeoutMS, created, updated int64
	if err := rows.Scan(&t.Tenant, &t.Name, &t.Queue, &t.Kind, &t.URL, &secrets, &timeoutMS, &created, &updated, &t.Topic, &types, &t.MaxAttempts); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(types), &t.EventTypes); err != nil {
		return nil, fmt.Errorf("target %q event types: %w", t.Name, err)
	}
	if err := json.Unmarshal([]byte(secrets), &t.Secrets); err != nil {
		return nil, fmt.Errorf("target %q secrets: %w", t.Name, err)
	}
	t.Timeout = time.Duration(timeoutMS) * time.Millisecond
	t.CreatedAt, t.UpdatedAt = fromUS(created), fromUS(updated)
	return &t, nil
}

// scanDeliveryAttempt reads one row of qAttemptDeliveryList: an attempt's
// columns, then its job's tenant.
func scanDeliveryAttempt(sc scanner) (*store.DeliveryAttempt, error) {
	var d store.DeliveryAttempt
	a, err := scanAttemptThen(sc, &d.Tenant)
	if err != nil {
		return nil, err
	}
	d.Attempt = *a
	return &d, nil
}
