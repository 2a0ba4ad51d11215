package pgstore

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// copyMinItems is the smallest batch inserted with COPY (keyless:
// insertCopy; with keys: insertKeyedCopy): below it the one-round-trip
// multi-row insert (insertSimple) or the combined keyed insert
// (qInsertFast) is as fast, and the insert groups that combine single
// enqueues stay on those paths.
const copyMinItems = 64

// copyColumns are the columns the COPY paths write, in copyBuf.jobRow's order.
var copyColumns = []string{"id", "tenant", "queue", "kind", "args", "state", "priority", "max_attempts",
	"run_at", "created_at", "partition_key", "idempotency_key", "depends_on", "metadata", "last_error",
	"dedup_window_us", "result_ttl_us", "retry_policy", "timeout_us"}

// qAllocIDs takes n ids from the jobs' sequence, in increasing order. The
// sequence is looked up once (an InitPlan), not per row.
const qAllocIDs = `SELECT nextval((SELECT pg_get_serial_sequence('{schema}.jobs', 'id')::regclass))
FROM generate_series(1, $1::integer) ORDER BY 1`

// copyable reports whether a keyless batch goes through insertCopy: large
// enough, and without FIFO partitions (their inserts hold partition locks
// until commit so that a partition's ids become visible in order; the
// multi-row insert takes those locks in its own implicit transaction).
func copyable(items []*insertItem) bool {
	if len(items) < copyMinItems {
		return false
	}
	for _, it := range items {
		if it.p.PartitionKey != "" {
			return false
		}
	}
	return true
}

// insertCopy inserts keyless, unpartitioned items with COPY, the fastest
// bulk path PostgreSQL has: one round trip takes the ids from the sequence,
// one streams the rows in binary (their own implicit transaction: the
// batch is atomic), one wakes the queues' listeners. The rows are not read
// back: each result is built from its item (builtJob), as the database
// stored it.
func (s *Store) insertCopy(ctx context.Context, items []*insertItem) ([]store.JobInsertResult, error) {
	var queues []string
	for _, it := range items {
		it.state, it.create = idemtype.StateAvailable, true
		if it.p.RunAt.After(it.now) {
			it.state = idemtype.StateScheduled
		} else {
			queues = append(queues, it.p.Queue)
		}
	}
	conn, err := s.conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	rows, err := conn.Query(ctx, s.sql(qAllocIDs), len(items))
	if err != nil {
		return nil, fmt.Errorf("allocate ids: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("allocate ids: %w", err)
	}
	if len(ids) != len(items) {
		return nil, fmt.Errorf("allocate ids: %d ids for %d jobs", len(ids), len(items))
	}
	for i, it := range items {
		it.id = ids[i]
	}
	if err := s.copyJobs(ctx, conn, items); err != nil {
		return nil, fmt.Errorf("copy jobs: %w", err)
	}
	// The rows are committed: a failed wake-up only delays the claimers
	// until their next poll, so it is logged, not returned.
	if err := s.notify(ctx, conn, queues); err != nil {
		s.logger.LogAttrs(ctx, slog.LevelWarn, "pgstore: wake queues after copy", slog.Any("err", err))
	}
	out := make([]store.JobInsertResult, len(items))
	for i, it := range items {
		out[i].Job = builtJob(it)
	}
	return out, nil
}
