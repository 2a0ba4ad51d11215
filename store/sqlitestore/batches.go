package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// The SQL of batches.
const (
	qBatchInsert = `INSERT INTO batches (tenant, key, created_at, metadata) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (tenant, key) DO NOTHING RETURNING id`
	qBatchByKey    = `SELECT id, tenant, key, created_at, metadata, COALESCE(on_finish_job_id, 0) FROM batches WHERE tenant = ?1 AND key = ?2`
	qBatchGet      = `SELECT id, tenant, key, created_at, metadata, COALESCE(on_finish_job_id, 0) FROM batches WHERE id = ?1 AND (?2 = '' OR tenant = ?2)`
	qBatchAssign   = `UPDATE jobs SET batch_id = ?1 WHERE id = ?2`
	qBatchOnFinish = `UPDATE batches SET on_finish_job_id = ?2 WHERE id = ?1`
)

func scanBatch(sc scanner) (*idemtype.Batch, error) {
	var b idemtype.Batch
	var created int64
	var meta []byte
	if err := sc.Scan(&b.ID, &b.Tenant, &b.Key, &created, &meta, &b.OnFinishJobID); err != nil {
		return nil, err
	}
	b.CreatedAt, b.Metadata = fromUS(created), meta
	return &b, nil
}

// BatchCreate implements store.Batches.
func (s *Store) BatchCreate(ctx context.Context, p *store.BatchCreateParams) (*store.BatchCreateResult, error) {
	now := truncUS(store.OrNow(p.Now))
	var out *store.BatchCreateResult
	err := s.write(ctx, len(p.Jobs)+1, func(t *wtx) error {
		// An item's error is a logical error, which the writer does not
		// roll back (it assumes nothing was written): the batch rolls its
		// own writes back to this savepoint.
		if _, err := t.exec("SAVEPOINT batch"); err != nil {
			return err
		}
		var id int64
		err := t.queryRow(qBatchInsert, p.Tenant, p.Key, toUS(now), nullBytes(p.Metadata)).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			b, err := scanBatch(t.queryRow(qBatchByKey, p.Tenant, p.Key))
			if err != nil {
				return err
			}
			out = &store.BatchCreateResult{Batch: b, Existing: true}
			_, err = t.exec("RELEASE batch")
			return err
		}
		if err != nil {
			return err
		}
		if itemErr, err := insertBatchJobs(t, id, p, now, &out); err != nil || itemErr != nil {
			if err == nil {
				if _, err = t.exec("ROLLBACK TO batch"); err == nil {
					_, err = t.exec("RELEASE batch")
				}
			}
			return errors.Join(itemErr, err)
		}
		if _, err := t.exec("RELEASE batch"); err != nil {
			return err
		}
		out.Batch = &idemtype.Batch{ID: id, Tenant: p.Tenant, Key: p.Key, CreatedAt: now, Metadata: p.Metadata,
			OnFinishJobID: out.OnFinish}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("create batch: %w", err)
	}
	s.noteKeys(p.Jobs)
	return out, nil
}

// insertBatchJobs inserts the jobs of batch id and sets *out; itemErr is the
// first job that could not be created.
func insertBatchJobs(t *wtx, id int64, p *store.BatchCreateParams, now time.Time, out **store.BatchCreateResult) (itemErr, err error) {
	res, err := insertJobs(t, p.Jobs, now)
	if err != nil {
		return nil, err
	}
	ids := make([]int64, 0, len(res))
	for i, r := range res {
		if r.Err != nil {
			return fmt.Errorf("jobs[%d]: %w", i, r.Err), nil
		}
		if r.Existing {
			// A job an item's key dedups onto stays in its own batch (or
			// in none), and the completion job does not wait for it: it
			// waits for exactly the jobs the batch lists. A repeated item
			// of this batch is its first occurrence's job, listed already.
			continue
		}
		if _, err := t.exec(qBatchAssign, id, r.Job.ID); err != nil {
			return nil, err
		}
		ids = append(ids, r.Job.ID)
	}
	*out = &store.BatchCreateResult{Jobs: res}
	if p.OnFinish == nil {
		return nil, nil
	}
	of, err := store.OnFinishParams(p.OnFinish, id, ids)
	if err != nil {
		return nil, err
	}
	fr, err := insertJobs(t, []*store.JobInsertParams{of}, now)
	if err != nil {
		return nil, err
	}
	if fr[0].Err != nil {
		return fmt.Errorf("on_finish: %w", fr[0].Err), nil
	}
	if _, err := t.exec(qBatchOnFinish, id, fr[0].Job.ID); err != nil {
		return nil, err
	}
	(*out).OnFinish = fr[0].Job.ID
	return nil, nil
}

// BatchGet implements store.Batches.
func (s *Store) BatchGet(ctx context.Context, p *store.BatchGetParams) (*idemtype.Batch, error) {
	b, err := scanBatch(s.readRow(ctx, qBatchGet, p.ID, p.Tenant))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("batch %d: %w", p.ID, idemtype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get batch %d: %w", p.ID, s.readErr(err))
	}
	return b, nil
}
