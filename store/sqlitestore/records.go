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

// RecordGet implements store.Records. A tenant of "" matches the key in any
// tenant (the first by tenant name).
func (s *Store) RecordGet(ctx context.Context, params *store.RecordGetParams) (*idemtype.Record, error) {
	tenant, key, now := params.Tenant, params.Key, params.Now
	q := qRecordGet
	if tenant == "" {
		q = qRecordGetAny
	}
	r, err := scanRecord(s.readRow(ctx, q, tenant, key, toUS(store.OrNow(now))))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get record %q: %w", key, idemtype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get record: %w", s.readErr(err))
	}
	return r, nil
}

// RecordDelete implements store.Records: one write, refused while the
// record's lease is live (qRecordDelete).
func (s *Store) RecordDelete(ctx context.Context, params *store.RecordDeleteParams) error {
	tenant, key, now := params.Tenant, params.Key, toUS(store.OrNow(params.Now))
	err := s.write(ctx, 1, func(t *wtx) error {
		res, err := t.exec(qRecordDelete, tenant, key, now)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n > 0 {
			return nil
		}
		var one int
		switch err := t.queryRow(qRecordExists, tenant, key).Scan(&one); {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("record %q: %w", key, idemtype.ErrNotFound)
		case err != nil:
			return err
		}
		return fmt.Errorf("record %q is held by a live lease: %w", key, idemtype.ErrKeyInProgress)
	})
	if err != nil {
		return fmt.Errorf("delete record: %w", err)
	}
	return nil
}

// RecordAcquire implements store.Records.
func (s *Store) RecordAcquire(ctx context.Context, p *store.RecordAcquireParams) (*store.RecordAcquireResult, error) {
	out, err := s.RecordAcquireMany(ctx, []*store.RecordAcquireParams{p})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// RecordAcquireMany implements store.Records: one write operation.
func (s *Store) RecordAcquireMany(ctx context.Context, ps []*store.RecordAcquireParams) ([]*store.RecordAcquireResult, error) {
	out := make([]*store.RecordAcquireResult, len(ps))
	err := s.write(ctx, len(ps), func(t *wtx) error {
		for i, p := range ps {
			r, err := acquireOne(t, p)
			if err != nil {
				return err
			}
			out[i] = r
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("acquire record: %w", err)
	}
	return out, nil
}

// acquireOne takes the execution lease of one key, or reads who holds it.
// A running job whose key's record is its own (qRecordOwnLease) holds the
// lease by its job lease already: the record is read, not written.
func acquireOne(t *wtx, p *store.RecordAcquireParams) (*store.RecordAcquireResult, error) {
	now := toUS(store.OrNow(p.Now))
	if p.JobID != 0 {
		r, err := scanRecord(t.queryRow(qRecordOwnLease, p.Tenant, p.Key, p.JobID, now))
		if err == nil {
			return &store.RecordAcquireResult{Acquired: true, Record: r}, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return nil, err
		}
	}
	r, err := scanRecord(t.queryRow(qRecordAcquire, p.Tenant, p.Key, p.JobID, p.Owner,
		nullUS(p.LeaseUntil), now, nullUS(p.DedupUntil), nullUS(p.ExpiresAt)))
	if err == nil {
		return &store.RecordAcquireResult{Acquired: true, Record: r}, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	r, err = scanRecord(t.queryRow(qRecordGetWriter, p.Tenant, p.Key))
	if err != nil {
		return nil, err
	}
	return &store.RecordAcquireResult{Acquired: false, Record: r}, nil
}

// RecordComplete implements store.Records.
func (s *Store) RecordComplete(ctx context.Context, p *store.RecordCompleteParams) error {
	now := toUS(store.OrNow(p.Now))
	result := p.Result
	if result == nil {
		result = []byte{}
	}
	err := s.write(ctx, 1, func(t *wtx) error {
		return execHeld(t, p.Key, qRecordComplete, result, boolInt(p.Compressed), p.ResultHash, now,
			p.TTL.Microseconds(), p.DurationMS, p.Tenant, p.Key, p.Owner)
	})
	if err != nil {
		return fmt.Errorf("complete record: %w", err)
	}
	return nil
}

// execHeld runs q, a write of key's record that only its lease holder may
// make, and reports idemtype.ErrLeaseLost when it changed no row.
func execHeld(t *wtx, key, q string, args ...any) error {
	res, err := t.exec(q, args...)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("record %q: %w", key, idemtype.ErrLeaseLost)
	}
	return nil
}

// RecordRelease implements store.Records.
func (s *Store) RecordRelease(ctx context.Context, params *store.RecordReleaseParams) error {
	tenant, key, owner := params.Tenant, params.Key, params.Owner
	err := s.write(ctx, 1, func(t *wtx) error {
		if l := params.JobLease; l != nil {
			_, err := t.exec(qKeyLeaseReleaseRun, tenant, key, owner, l.ID, l.Token)
			return err
		}
		q := qKeyLeaseRelease
		if params.Forget {
			q = qKeyLeaseForget
		}
		_, err := t.exec(q, tenant, key, owner)
		return err
	})
	if err != nil {
		return fmt.Errorf("release record: %w", err)
	}
	return nil
}

// RecordRenew implements store.Records.
func (s *Store) RecordRenew(ctx context.Context, p *store.RecordRenewParams) error {
	if p.Owner == "" {
		// The stored "no lease" owner: never a holder.
		return fmt.Errorf("renew record %q: %w", p.Key, idemtype.ErrLeaseLost)
	}
	err := s.write(ctx, 1, func(t *wtx) error {
		return execHeld(t, p.Key, qKeyLeaseRenew, p.Tenant, p.Key, p.Owner, toUS(p.LeaseUntil), toUS(store.OrNow(p.Now)))
	})
	if err != nil {
		return fmt.Errorf("renew record: %w", err)
	}
	return nil
}

// RecordStats implements store.Records.
func (s *Store) RecordStats(ctx context.Context, params *store.RecordStatsParams) (*store.RecordStats, error) {
	tenant, now := params.Tenant, params.Now
	now = store.OrNow(now)
	var st store.RecordStats
	err := s.readRow(ctx, qRecordStats, tenant, toUS(now), toUS(now.Add(24*time.Hour))).
		Scan(&st.Entries, &st.InProgress, &st.Expiring24h, &st.Expired, &st.SizeBytes, &st.Completed, &st.Failed)
	if err != nil {
		return nil, fmt.Errorf("record stats: %w", s.readErr(err))
	}
	return &st, nil
}
