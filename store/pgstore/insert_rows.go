package pgstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// Job rows as column arrays, the multi-row insert of keyless batches and
// the wake-up of the queues' listeners (insert.go decides which path a
// batch takes; copy.go is the bulk path).
// insertArgs returns the item indexes and the arguments of qInsertJobs for
// the items marked create.
func insertArgs(items []*insertItem) ([]int, []any) {
	var (
		idx []int
		ids []int64
		c   jobArrays
	)
	for i, it := range items {
		if !it.create {
			continue
		}
		idx = append(idx, i)
		ids = append(ids, it.id)
		c.add(it)
	}
	return idx, []any{ids, c.tenants, c.queues, c.kinds, c.args, c.states, c.prios, c.maxes,
		c.runAts, c.parts, c.keys, c.deps, c.metas, c.lastErrs, c.dedupUs, c.ttlUs, c.nows, c.retries, c.timeoutUs}
}

// jobArrays are the per-item column arrays that both job inserts bind
// (qInsertFast and qInsertJobs), one entry per item in item order.
type jobArrays struct {
	tenants, queues, kinds, args, states, parts, keys, deps, lastErrs []string
	metas, retries                                                    []*string
	prios, maxes                                                      []int32
	runAts, nows                                                      []time.Time
	dedupUs, ttlUs, timeoutUs                                         []int64
}

// add appends the columns of one item.
func (c *jobArrays) add(it *insertItem) {
	p := it.p
	a := string(p.Args)
	if a == "" {
		a = "{}"
	}
	c.tenants = append(c.tenants, p.Tenant)
	c.queues = append(c.queues, p.Queue)
	c.kinds = append(c.kinds, p.Kind)
	c.args = append(c.args, a)
	c.states = append(c.states, string(it.state))
	c.prios = append(c.prios, int32(p.Priority))
	c.maxes = append(c.maxes, int32(p.MaxAttempts))
	c.runAts = append(c.runAts, p.RunAt)
	c.parts = append(c.parts, p.PartitionKey)
	c.keys = append(c.keys, p.IdempotencyKey)
	c.deps = append(c.deps, int64sLiteral(p.DependsOn))
	c.metas = append(c.metas, nullText(p.Metadata))
	c.lastErrs = append(c.lastErrs, it.lastErr)
	c.dedupUs = append(c.dedupUs, micros(p.DedupWindow))
	c.ttlUs = append(c.ttlUs, micros(p.ResultTTL))
	c.nows = append(c.nows, it.now)
	c.retries = append(c.retries, nullText(p.RetryPolicy))
	c.timeoutUs = append(c.timeoutUs, micros(p.Timeout))
}

// insertJobs inserts the items marked create in one multi-row statement and
// returns the new rows by item index.
func (s *Store) insertJobs(ctx context.Context, tx querier, items []*insertItem) (map[int]*idemtype.JobRow, error) {
	out := map[int]*idemtype.JobRow{}
	idx, args := insertArgs(items)
	if len(idx) == 0 {
		return out, nil
	}
	rows, err := tx.Query(ctx, s.sql(qInsertJobs), args...)
	if err != nil {
		return nil, fmt.Errorf("insert: %w", err)
	}
	jobs, err := collectJobs(rows)
	if err != nil {
		return nil, fmt.Errorf("insert: %w", err)
	}
	if len(jobs) != len(idx) {
		return nil, fmt.Errorf("insert: %d rows for %d jobs", len(jobs), len(idx))
	}
	for k, j := range jobs {
		out[idx[k]] = j
	}
	return out, nil
}

// insertSimple inserts items without idempotency keys or dependencies in
// one round trip: the partition locks, the multi-row insert and the
// notification are pipelined in one implicit transaction.
func (s *Store) insertSimple(ctx context.Context, items []*insertItem) ([]store.JobInsertResult, error) {
	var parts, queues []string
	for _, it := range items {
		it.state, it.create = idemtype.StateAvailable, true
		if it.p.RunAt.After(it.now) {
			it.state = idemtype.StateScheduled
		} else {
			queues = append(queues, it.p.Queue)
		}
		if it.p.PartitionKey != "" {
			parts = append(parts, partitionName(it.p))
		}
	}
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	_, args := insertArgs(items)
	b := &pgx.Batch{}
	if len(parts) > 0 {
		b.Queue(qLockPartitions, s.partitionLockClass(), parts)
	}
	b.Queue(s.sql(qInsertJobs), args...)
	if len(queues) > 0 {
		b.Queue(qNotify, s.schema, queues)
	}
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	if len(parts) > 0 {
		if _, err := br.Exec(); err != nil {
			return nil, fmt.Errorf("lock partitions: %w", err)
		}
	}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	jobs, err := collectJobs(rows)
	if err != nil {
		return nil, err
	}
	if len(queues) > 0 {
		if _, err := br.Exec(); err != nil {
			return nil, fmt.Errorf("notify: %w", err)
		}
	}
	if err := br.Close(); err != nil {
		return nil, err
	}
	if len(jobs) != len(items) {
		return nil, fmt.Errorf("%d rows for %d jobs", len(jobs), len(items))
	}
	out := make([]store.JobInsertResult, len(jobs))
	for i, j := range jobs {
		out[i].Job = j
	}
	return out, nil
}

// int64sLiteral renders ids as a PostgreSQL array literal.
func int64sLiteral(ids []int64) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(id, 10))
	}
	b.WriteByte('}')
	return b.String()
}

// notify sends one notification per distinct queue on the schema's channel;
// inside a transaction it is delivered at commit.
func (s *Store) notify(ctx context.Context, q querier, queues []string) error {
	if len(queues) == 0 {
		return nil
	}
	if _, err := q.Exec(ctx, qNotify, s.schema, queues); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	return nil
}
