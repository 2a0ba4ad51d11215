package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// RecordGet implements store.Records.
func (s *Store) RecordGet(ctx context.Context, params *store.RecordGetParams) (*idemtype.Record, error) {
	tenant, key, now := params.Tenant, params.Key, params.Now
	db, err := s.db()
	if err != nil {
		return nil, err
	}
	r, err := scanRecord(db.QueryRow(ctx, s.sql(qRecordGet), tenant, key, store.OrNow(now)))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get record %q: %w", key, idemtype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get record %q: %w", key, err)
	}
	return r, nil
}

// RecordDelete implements store.Records: one statement, refused while the
// record's lease is live (qRecordDelete).
func (s *Store) RecordDelete(ctx context.Context, params *store.RecordDeleteParams) error {
	tenant, key := params.Tenant, params.Key
	db, err := s.db()
	if err != nil {
		return err
	}
	var deleted, exists bool
	err = db.QueryRow(ctx, s.sql(qRecordDelete), tenant, key, s.expiryClock(store.OrNow(params.Now))).Scan(&deleted, &exists)
	switch {
	case err != nil:
		return fmt.Errorf("delete record %q: %w", key, err)
	case deleted:
		return nil
	case exists:
		return fmt.Errorf("delete record %q: held by a live lease: %w", key, idemtype.ErrKeyInProgress)
	}
	return fmt.Errorf("delete record %q: %w", key, idemtype.ErrNotFound)
}

// RecordAcquire implements store.Records with one statement
// (qRecordAcquireMany: a read when the key's record is the running job's
// own, else INSERT … ON CONFLICT DO UPDATE … WHERE); when it does not take
// the lease, a second statement (a new snapshot, which sees the winner's
// committed row) reads the record.
func (s *Store) RecordAcquire(ctx context.Context, p *store.RecordAcquireParams) (*store.RecordAcquireResult, error) {
	db, err := s.db()
	if err != nil {
		return nil, err
	}
	return s.acquireOne(ctx, db, p)
}

// RecordAcquireMany implements store.Records: one transaction, so one
// commit for the whole claim batch.
func (s *Store) RecordAcquireMany(ctx context.Context, ps []*store.RecordAcquireParams) ([]*store.RecordAcquireResult, error) {
	if len(ps) == 0 {
		return []*store.RecordAcquireResult{}, nil
	}
	// Lock keys in (tenant, key) order so that two batches never wait on
	// each other in a cycle; items of one key keep their order.
	order := make([]int, len(ps))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		pa, pb := ps[order[a]], ps[order[b]]
		if pa.Tenant != pb.Tenant {
			return pa.Tenant < pb.Tenant
		}
		return pa.Key < pb.Key
	})
	out := make([]*store.RecordAcquireResult, len(ps))
	var held []int
	var err error
	if distinctKeysOneNow(ps, order) {
		// One statement, atomic by itself: no explicit transaction, so
		// one round trip instead of three.
		var db querier
		if db, err = s.db(); err == nil {
			held, err = s.acquireSet(ctx, db, ps, order, out)
		}
	} else {
		// One statement per item, in order, in one round trip and one
		// transaction (one commit for the whole claim batch).
		err = s.tx(ctx, func(tx pgx.Tx) error {
			var err error
			held, err = s.acquireEach(ctx, tx, ps, order, out)
			return err
		})
	}
	if err != nil {
		return nil, err
	}
	if len(held) > 0 {
		if err := s.readHeld(ctx, ps, held, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readHeld reads who holds the keys of ps[held] (each statement a new
// snapshot, which sees the winner's committed row), in one round trip.
func (s *Store) readHeld(ctx context.Context, ps []*store.RecordAcquireParams, held []int, out []*store.RecordAcquireResult) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	b := &pgx.Batch{}
	for _, i := range held {
		b.Queue(s.sql(qRecordGet), ps[i].Tenant, ps[i].Key, store.OrNow(ps[i].Now))
	}
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	for _, i := range held {
		r, err := scanRecord(br.QueryRow())
		if err != nil {
			return fmt.Errorf("acquire record %q: %w", ps[i].Key, err)
		}
		out[i] = &store.RecordAcquireResult{Record: r}
	}
	return br.Close()
}

// distinctKeysOneNow reports whether ps (sorted by order) name distinct
// keys and share one Now: then one statement acquires them all (an INSERT
// … ON CONFLICT DO UPDATE may not update one row twice).
func distinctKeysOneNow(ps []*store.RecordAcquireParams, order []int) bool {
	for n := 1; n < len(order); n++ {
		a, b := ps[order[n-1]], ps[order[n]]
		if (a.Tenant == b.Tenant && a.Key == b.Key) || !a.Now.Equal(b.Now) {
			return false
		}
	}
	return true
}

// acquireSet acquires ps[order]: the keys their running jobs own by a read
// (qRecordAcquireOwn), the others in one statement (qRecordAcquireMany),
// filling out for the acquired keys; it returns the indexes of the others.
func (s *Store) acquireSet(ctx context.Context, q querier, ps []*store.RecordAcquireParams, order []int, out []*store.RecordAcquireResult) ([]int, error) {
	if !s.acquireFullOnly {
		var err error
		if order, err = s.acquireOwn(ctx, q, ps, order, out); err != nil || len(order) == 0 {
			return nil, err
		}
	}
	return s.acquireAll(ctx, q, ps, order, out)
}

// acquireOwn fills out for the keys of ps[order] that their running jobs
// own (qRecordAcquireOwn: a read) and returns the others, in order.
func (s *Store) acquireOwn(ctx context.Context, q querier, ps []*store.RecordAcquireParams, order []int, out []*store.RecordAcquireResult) ([]int, error) {
	var tenants, keys []string
	var jobIDs []int64
	for _, i := range order {
		if p := ps[i]; p.JobID != 0 {
			tenants, keys, jobIDs = append(tenants, p.Tenant), append(keys, p.Key), append(jobIDs, p.JobID)
		}
	}
	if len(jobIDs) == 0 {
		return order, nil
	}
	now := store.OrNow(ps[0].Now)
	rows, err := q.Query(ctx, s.sql(qRecordAcquireOwn), tenants, keys, jobIDs, now, s.expiryClock(now))
	if err != nil {
		return nil, fmt.Errorf("acquire own records: %w", err)
	}
	got, err := collect(rows, scanRecord)
	if err != nil {
		return nil, fmt.Errorf("acquire own records: %w", err)
	}
	return matchAcquired(got, ps, order, out, true), nil
}

// acquireAll acquires ps[order] with qRecordAcquireMany.
func (s *Store) acquireAll(ctx context.Context, q querier, ps []*store.RecordAcquireParams, order []int, out []*store.RecordAcquireResult) ([]int, error) {
	sub := ps
	if len(order) < len(ps) {
		sub = make([]*store.RecordAcquireParams, len(order))
		for n, i := range order {
			sub[n] = ps[i]
		}
	}
	rows, err := q.Query(ctx, s.sql(qRecordAcquireMany), s.acquireArgs(sub)...)
	if err != nil {
		return nil, fmt.Errorf("acquire records: %w", err)
	}
	got, err := collect(rows, scanRecord)
	if err != nil {
		return nil, fmt.Errorf("acquire records: %w", err)
	}
	return matchAcquired(got, ps, order, out, false), nil
}

// matchAcquired fills out for the items of ps[order] whose key is among
// the acquired records got (and, when own, whose job the record names) and
// returns the others, in order.
func matchAcquired(got []*idemtype.Record, ps []*store.RecordAcquireParams, order []int, out []*store.RecordAcquireResult, own bool) []int {
	type tk struct{ tenant, key string }
	byKey := make(map[tk]*idemtype.Record, len(got))
	for _, r := range got {
		byKey[tk{r.Tenant, r.Key}] = r
	}
	var rest []int
	for _, i := range order {
		if r, ok := byKey[tk{ps[i].Tenant, ps[i].Key}]; ok && (!own || ps[i].JobID == r.JobID) {
			out[i] = &store.RecordAcquireResult{Acquired: true, Record: r}
		} else {
			rest = append(rest, i)
		}
	}
	return rest
}

// acquireArgs binds ps (distinct keys; the first item's Now) to
// qRecordAcquireMany.
func (s *Store) acquireArgs(ps []*store.RecordAcquireParams) []any {
	n := len(ps)
	tenants, keys, owners := make([]string, n), make([]string, n), make([]string, n)
	jobIDs := make([]int64, n)
	leases, dedups, expiries := make([]time.Time, n), make([]*time.Time, n), make([]*time.Time, n)
	for i, p := range ps {
		tenants[i], keys[i], owners[i], jobIDs[i] = p.Tenant, p.Key, p.Owner, p.JobID
		leases[i], dedups[i], expiries[i] = p.LeaseUntil, nullTime(p.DedupUntil), nullTime(p.ExpiresAt)
	}
	now := store.OrNow(ps[0].Now)
	return []any{tenants, keys, jobIDs, owners, leases, now, dedups, expiries, s.expiryClock(now)}
}

// acquireEach acquires ps one statement each, in order (keys named twice
// are taken in item order), in one round trip.
func (s *Store) acquireEach(ctx context.Context, tx pgx.Tx, ps []*store.RecordAcquireParams, order []int, out []*store.RecordAcquireResult) ([]int, error) {
	b := &pgx.Batch{}
	for _, i := range order {
		b.Queue(s.sql(qRecordAcquireMany), s.acquireArgs(ps[i:i+1])...)
	}
	br := tx.SendBatch(ctx, b)
	var held []int
	for _, i := range order {
		r, err := scanRecord(br.QueryRow())
		switch {
		case err == nil:
			out[i] = &store.RecordAcquireResult{Acquired: true, Record: r}
		case errors.Is(err, pgx.ErrNoRows):
			held = append(held, i)
		default:
			br.Close()
			return nil, fmt.Errorf("acquire record %q: %w", ps[i].Key, err)
		}
	}
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("acquire records: %w", err)
	}
	return held, nil
}

// acquireOne takes the execution lease of one key, or reads who holds it.
func (s *Store) acquireOne(ctx context.Context, q querier, p *store.RecordAcquireParams) (*store.RecordAcquireResult, error) {
	now := store.OrNow(p.Now)
	r, err := scanRecord(q.QueryRow(ctx, s.sql(qRecordAcquireMany), s.acquireArgs([]*store.RecordAcquireParams{p})...))
	if err == nil {
		return &store.RecordAcquireResult{Acquired: true, Record: r}, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("acquire record %q: %w", p.Key, err)
	}
	r, err = scanRecord(q.QueryRow(ctx, s.sql(qRecordGet), p.Tenant, p.Key, now))
	if err != nil {
		// Deleted or expired in between: the caller may try again.
		return nil, fmt.Errorf("acquire record %q: %w", p.Key, err)
	}
	return &store.RecordAcquireResult{Record: r}, nil
}

// RecordComplete implements store.Records.
func (s *Store) RecordComplete(ctx context.Context, p *store.RecordCompleteParams) error {
	db, err := s.db()
	if err != nil {
		return err
	}
	res := p.Result
	if res == nil {
		res = []byte{}
	}
	tag, err := db.Exec(ctx, s.sql(qRecordComplete), p.Tenant, p.Key, p.Owner, res, p.Compressed,
		p.ResultHash, micros(p.TTL), store.OrNow(p.Now), p.DurationMS)
	if err != nil {
		return fmt.Errorf("complete record %q: %w", p.Key, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("complete record %q: %w", p.Key, idemtype.ErrLeaseLost)
	}
	return nil
}

// RecordRelease implements store.Records.
func (s *Store) RecordRelease(ctx context.Context, params *store.RecordReleaseParams) error {
	tenant, key, owner := params.Tenant, params.Key, params.Owner
	db, err := s.db()
	if err != nil {
		return err
	}
	var jobID int64
	var token string
	if l := params.JobLease; l != nil {
		jobID, token = l.ID, l.Token
	}
	if params.Forget && params.JobLease == nil {
		if _, err := db.Exec(ctx, s.sql(qRecordForget), tenant, key, owner); err != nil {
			return fmt.Errorf("release record %q: %w", key, err)
		}
		return nil
	}
	if _, err := db.Exec(ctx, s.sql(qRecordRelease), tenant, key, owner, jobID, token); err != nil {
		return fmt.Errorf("release record %q: %w", key, err)
	}
	return nil
}

// RecordRenew implements store.Records.
func (s *Store) RecordRenew(ctx context.Context, p *store.RecordRenewParams) error {
	db, err := s.db()
	if err != nil {
		return err
	}
	var until time.Time
	err = db.QueryRow(ctx, s.sql(qRecordRenew), p.Tenant, p.Key, p.Owner, p.LeaseUntil, store.OrNow(p.Now)).Scan(&until)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("renew record %q: %w", p.Key, idemtype.ErrLeaseLost)
	}
	if err != nil {
		return fmt.Errorf("renew record %q: %w", p.Key, err)
	}
	if p.Stored != nil {
		*p.Stored = until.UTC() // shifted by the database's clock (leaseShiftRenew)
	}
	return nil
}

// RecordStats implements store.Records.
func (s *Store) RecordStats(ctx context.Context, params *store.RecordStatsParams) (*store.RecordStats, error) {
	tenant, now := params.Tenant, params.Now
	db, err := s.db()
	if err != nil {
		return nil, err
	}
	var st store.RecordStats
	err = db.QueryRow(ctx, s.sql(qRecordStats), tenant, store.OrNow(now)).Scan(&st.Entries, &st.InProgress,
		&st.Expiring24h, &st.Expired, &st.SizeBytes, &st.Completed, &st.Failed)
	if err != nil {
		return nil, fmt.Errorf("record stats: %w", err)
	}
	return &st, nil
}
