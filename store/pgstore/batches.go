package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// The SQL of batches.
const (
	qBatchInsert = `INSERT INTO {schema}.batches (tenant, key, created_at, metadata) VALUES ($1, $2, $3, $4::json)
ON CONFLICT (tenant, key) DO NOTHING RETURNING id`
	qBatchByKey    = `SELECT id, tenant, key, created_at, metadata::text, COALESCE(on_finish_job_id, 0) FROM {schema}.batches WHERE tenant = $1 AND key = $2`
	qBatchGet      = `SELECT id, tenant, key, created_at, metadata::text, COALESCE(on_finish_job_id, 0) FROM {schema}.batches WHERE id = $1 AND ($2 = '' OR tenant = $2)`
	qBatchAssign   = `UPDATE {schema}.jobs SET batch_id = $1 WHERE id = ANY($2::bigint[])`
	qBatchOnFinish = `UPDATE {schema}.batches SET on_finish_job_id = $2 WHERE id = $1`
)

func scanBatch(row pgx.Row) (*idemtype.Batch, error) {
	var b idemtype.Batch
	var meta *string
	if err := row.Scan(&b.ID, &b.Tenant, &b.Key, &b.CreatedAt, &meta, &b.OnFinishJobID); err != nil {
		return nil, err
	}
	b.CreatedAt = utc(b.CreatedAt)
	if meta != nil {
		b.Metadata = []byte(*meta)
	}
	return &b, nil
}

// BatchCreate implements store.Batches.
func (s *Store) BatchCreate(ctx context.Context, p *store.BatchCreateParams) (*store.BatchCreateResult, error) {
	now := store.OrNow(p.Now).UTC().Truncate(time.Microsecond)
	var meta *string
	if p.Metadata != nil {
		m := string(p.Metadata)
		meta = &m
	}
	var out *store.BatchCreateResult
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var id int64
		err := tx.QueryRow(ctx, s.sql(qBatchInsert), p.Tenant, p.Key, now, meta).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			b, err := scanBatch(tx.QueryRow(ctx, s.sql(qBatchByKey), p.Tenant, p.Key))
			if err != nil {
				return err
			}
			out = &store.BatchCreateResult{Batch: b, Existing: true}
			return nil
		}
		if err != nil {
			return err
		}
		res, err := s.JobInsertManyTx(ctx, tx, &store.JobInsertManyParams{Jobs: p.Jobs, Now: now})
		if err != nil {
			return err
		}
		created := make([]int64, 0, len(res))
		for i, r := range res {
			if r.Err != nil {
				return fmt.Errorf("jobs[%d]: %w", i, r.Err)
			}
			if !r.Existing {
				// A job an item's key dedups onto stays in its own batch
				// (or in none), and the completion job does not wait for
				// it: it waits for exactly the jobs the batch lists. A
				// repeated item of this batch is its first occurrence's
				// job, listed already.
				created = append(created, r.Job.ID)
			}
		}
		if _, err := tx.Exec(ctx, s.sql(qBatchAssign), id, created); err != nil {
			return err
		}
		onFinish, err := s.batchOnFinish(ctx, tx, p, id, created, now)
		if err != nil {
			return err
		}
		out = &store.BatchCreateResult{Jobs: res, OnFinish: onFinish, Batch: &idemtype.Batch{ID: id,
			Tenant: p.Tenant, Key: p.Key, CreatedAt: now, Metadata: p.Metadata, OnFinishJobID: onFinish}}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("create batch: %w", err)
	}
	return out, nil
}

// batchOnFinish inserts the completion job of batch id (whose jobs are ids)
// in tx and returns its id; 0 when the batch has none.
func (s *Store) batchOnFinish(ctx context.Context, tx pgx.Tx, p *store.BatchCreateParams, id int64, ids []int64, now time.Time) (int64, error) {
	if p.OnFinish == nil {
		return 0, nil
	}
	of, err := store.OnFinishParams(p.OnFinish, id, ids)
	if err != nil {
		return 0, err
	}
	res, err := s.JobInsertManyTx(ctx, tx, &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{of}, Now: now})
	if err != nil {
		return 0, err
	}
	if res[0].Err != nil {
		return 0, fmt.Errorf("on_finish: %w", res[0].Err)
	}
	if _, err := tx.Exec(ctx, s.sql(qBatchOnFinish), id, res[0].Job.ID); err != nil {
		return 0, err
	}
	return res[0].Job.ID, nil
}

// BatchGet implements store.Batches.
func (s *Store) BatchGet(ctx context.Context, p *store.BatchGetParams) (*idemtype.Batch, error) {
	db, err := s.db()
	if err != nil {
		return nil, err
	}
	b, err := scanBatch(db.QueryRow(ctx, s.sql(qBatchGet), p.ID, p.Tenant))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("batch %d: %w", p.ID, idemtype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get batch %d: %w", p.ID, err)
	}
	return b, nil
}
