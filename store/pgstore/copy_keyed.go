package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem/store"
)

// recordCopyColumns are the records' columns insertKeyedCopy writes, in
// copyBuf.recordRow's order: what qInsertFast's rec writes.
var recordCopyColumns = []string{"tenant", "key", "status", "fingerprint", "job_id", "created_at", "dedup_until", "expires_at"}

// keyedCopyable reports whether a batch with keys goes through
// insertKeyedCopy: at least copyMinItems items, none with dependencies
// (their states need the transaction's locks first, and they are rare in
// bulk).
func keyedCopyable(items []*insertItem) bool {
	if len(items) < copyMinItems {
		return false
	}
	for _, it := range items {
		if len(it.p.DependsOn) > 0 {
			return false
		}
	}
	return true
}

// insertKeyedCopy inserts a large batch with keys the way a batch of new
// keys is fastest: in one explicit transaction on conn, [BEGIN, partition
// locks, SAVEPOINT, the ids] in one round trip, then the records of the
// keys' leaders by COPY in (tenant, key) order, the jobs of the keyless
// items and the leaders by COPY, and [notify, COMMIT]. The unique key of
// records decides as it does for qInsertFast's ON CONFLICT: a key that
// exists (or is being inserted by a transaction that then commits) fails
// the records' COPY with a unique violation; the transaction rolls back
// to the savepoint (partition locks kept) and the batch takes the general
// path (insertKeyed), which settles the keys that exist. Such a retry
// costs the rows copied before the conflict; a batch of new keys, the
// bulk case, never pays it. Records are copied in the order every
// statement that locks records uses, so concurrent batches wait on one
// another's keys without deadlocking.
func (s *Store) insertKeyedCopy(ctx context.Context, conn *pgxpool.Conn, items []*insertItem) ([]store.JobInsertResult, error) {
	out, err := s.keyedCopy(ctx, conn, items)
	return rollbackOnError(ctx, conn, out, err)
}

// keyedCopy is insertKeyedCopy; the caller rolls back when it returns an
// error.
func (s *Store) keyedCopy(ctx context.Context, conn *pgxpool.Conn, items []*insertItem) ([]store.JobInsertResult, error) {
	setInitialStates(items)
	k := newKeyedInsert(items)
	lead, _ := k.leaders()
	if err := s.copyBegin(ctx, conn, items); err != nil {
		return nil, err
	}
	err := s.copyRecords(ctx, conn, items, lead)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		// A key exists: the general path, in the same transaction.
		if _, err := conn.Exec(ctx, "ROLLBACK TO SAVEPOINT idem_copy"); err != nil {
			return nil, fmt.Errorf("rollback to savepoint: %w", err)
		}
		s.keyedCopyRetried.Add(1)
		return s.insertKeyed(ctx, conn, newKeyedInsert(items), false, true)
	}
	if err != nil {
		return nil, fmt.Errorf("copy records: %w", err)
	}
	created := make([]*insertItem, 0, len(items))
	for _, i := range lead {
		items[i].create = true
	}
	for _, it := range items {
		if it.create {
			created = append(created, it)
		}
	}
	// Items repeating a key of the batch are answered from its leader
	// (answerDuplicates); without any, the maps it reads are not built.
	repeats := len(created) < len(items)
	for i, it := range items {
		if !it.create {
			continue
		}
		j := builtJob(it)
		k.res[i] = store.JobInsertResult{Job: j}
		if repeats && it.p.IdempotencyKey != "" {
			key := rk{it.p.Tenant, it.p.IdempotencyKey}
			k.byID[it.id] = j
			k.fps[key] = it.p.Fingerprint
			k.jobOfKey[key] = it.id
		}
	}
	if err := s.copyJobs(ctx, conn, created); err != nil {
		return nil, fmt.Errorf("copy jobs: %w", err)
	}
	if repeats {
		k.answerDuplicates()
	}
	if err := s.insertCommit(ctx, conn, k, true); err != nil {
		return nil, err
	}
	s.keyedCopied.Add(1)
	return k.res, nil
}

// copyBegin sends [BEGIN, partition locks, SAVEPOINT, qAllocIDs] in one
// round trip and sets each item's id, in item order.
func (s *Store) copyBegin(ctx context.Context, conn *pgxpool.Conn, items []*insertItem) error {
	var locks []string
	for _, it := range items {
		if it.p.PartitionKey != "" {
			locks = append(locks, partitionName(it.p))
		}
	}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	if len(locks) > 0 {
		b.Queue(qLockPartitions, s.partitionLockClass(), locks)
	}
	b.Queue("SAVEPOINT idem_copy")
	b.Queue(s.sql(qAllocIDs), len(items))
	br := conn.SendBatch(ctx, b)
	defer br.Close()
	for range b.Len() - 1 {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
	}
	rows, err := br.Query()
	if err != nil {
		return fmt.Errorf("allocate ids: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return fmt.Errorf("allocate ids: %w", err)
	}
	if len(ids) != len(items) {
		return fmt.Errorf("allocate ids: %d ids for %d jobs", len(ids), len(items))
	}
	for i, it := range items {
		it.id = ids[i]
	}
	return br.Close()
}
