package pgstore

import (
	"context"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// JobInsertMany implements store.Jobs. Small batches from concurrent
// callers are combined into shared transactions (see group.go).
func (s *Store) JobInsertMany(ctx context.Context, p *store.JobInsertManyParams) ([]store.JobInsertResult, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	if len(p.Jobs) == 0 {
		return []store.JobInsertResult{}, nil
	}
	if s.groups != nil && len(p.Jobs) <= groupInsertMaxReq {
		return s.groupInsert(ctx, p)
	}
	out, err := s.insertDirect(ctx, newItems(p))
	if err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	return out, nil
}

// insertDirect inserts items in their own transaction: one pipelined
// round trip when no item has a key or dependencies.
func (s *Store) insertDirect(ctx context.Context, items []*insertItem) ([]store.JobInsertResult, error) {
	if simpleItems(items) {
		return s.insertSimple(ctx, items)
	}
	var out []store.JobInsertResult
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = s.insertTx(ctx, tx, items)
		return err
	})
	return out, err
}

// newItems returns the items of a batch, each with the batch's now.
func newItems(p *store.JobInsertManyParams) []*insertItem {
	now := store.OrNow(p.Now)
	items := make([]*insertItem, len(p.Jobs))
	for i, jp := range p.Jobs {
		items[i] = &insertItem{p: jp, now: now}
	}
	return items
}

// simpleItems reports whether no item has an idempotency key or dependencies.
func simpleItems(items []*insertItem) bool {
	for _, it := range items {
		if it.p.IdempotencyKey != "" || len(it.p.DependsOn) > 0 {
			return false
		}
	}
	return true
}

// rk is the identity of an idempotency record.
type rk struct{ tenant, key string }

// insertItem is one item of a batch on its way into the jobs table.
type insertItem struct {
	p       *store.JobInsertParams
	now     time.Time // the Now of the item's batch
	state   idemtype.JobState
	lastErr string
	id      int64 // preallocated id; 0 = the column default
	create  bool  // the job is inserted by this batch
}

// JobInsertManyTx is JobInsertMany inside the caller's transaction tx
// (which must be on this store's database): the jobs exist exactly when tx
// commits. Notifications are sent at commit.
func (s *Store) JobInsertManyTx(ctx context.Context, tx pgx.Tx, p *store.JobInsertManyParams) ([]store.JobInsertResult, error) {
	return s.insertTx(ctx, tx, newItems(p))
}

// insertTx inserts items (each with its own now) in tx.
func (s *Store) insertTx(ctx context.Context, tx pgx.Tx, items []*insertItem) ([]store.JobInsertResult, error) {
	res := make([]store.JobInsertResult, len(items))
	if err := s.insertDeps(ctx, tx, items, res); err != nil {
		return nil, err
	}
	if err := s.lockPartitions(ctx, tx, items, res); err != nil {
		return nil, err
	}
	leaders := map[rk]int{}
	var followers []int
	for i, it := range items {
		if res[i].Err != nil {
			continue
		}
		if it.p.IdempotencyKey == "" {
			it.create = true
			continue
		}
		k := rk{it.p.Tenant, it.p.IdempotencyKey}
		if _, ok := leaders[k]; ok {
			followers = append(followers, i)
			continue
		}
		leaders[k] = i
	}
	if len(leaders) > 0 {
		if err := s.allocateIDs(ctx, tx, items, res); err != nil {
			return nil, err
		}
	}
	// Records decide the keyed items: the unique constraint on (tenant, key)
	// with ON CONFLICT, never a read followed by a write.
	fps := map[rk]string{}
	jobOfKey := map[rk]int64{}
	if len(leaders) > 0 {
		lead := make([]int, 0, len(leaders))
		for _, i := range leaders {
			lead = append(lead, i)
		}
		sort.Slice(lead, func(a, b int) bool {
			pa, pb := items[lead[a]].p, items[lead[b]].p
			if pa.Tenant != pb.Tenant {
				return pa.Tenant < pb.Tenant
			}
			return pa.IdempotencyKey < pb.IdempotencyKey
		})
		// A plain insert first: new keys (the common case) are created and
		// existing ones are neither changed nor locked.
		pending, err := s.upsertRecords(ctx, tx, qInsertRecords, items, lead, fps, jobOfKey)
		if err != nil {
			return nil, err
		}
		// Keys that exist: read them (a new statement sees the winners'
		// committed rows). Open windows are duplicates; closed windows are
		// reopened by the conditional upsert, which decides atomically.
		for range 3 {
			if pending, err = s.existingKeys(ctx, tx, items, pending, fps, jobOfKey); err != nil {
				return nil, err
			}
			if len(pending) == 0 {
				break
			}
			if pending, err = s.upsertRecords(ctx, tx, qUpsertRecords, items, pending, fps, jobOfKey); err != nil {
				return nil, err
			}
		}
		for _, i := range pending {
			res[i].Err = fmt.Errorf("idempotency key %q changed concurrently, try again", items[i].p.IdempotencyKey)
		}
	}
	created, err := s.insertJobs(ctx, tx, items)
	if err != nil {
		return nil, err
	}
	byID := map[int64]*idemtype.JobRow{}
	for i, j := range created {
		res[i] = store.JobInsertResult{Job: j}
		byID[j.ID] = j
	}
	// Items whose key was in its window: fetch the jobs the records point to.
	var want []int64
	for i, it := range items {
		if res[i].Err == nil && res[i].Job == nil && !it.create {
			if id := jobOfKey[rk{it.p.Tenant, it.p.IdempotencyKey}]; id != 0 && byID[id] == nil {
				want = append(want, id)
			}
		}
	}
	if len(want) > 0 {
		rows, err := tx.Query(ctx, s.sql(qJobsByID), want)
		if err != nil {
			return nil, fmt.Errorf("read existing jobs: %w", err)
		}
		jobs, err := collectJobs(rows)
		if err != nil {
			return nil, fmt.Errorf("read existing jobs: %w", err)
		}
		for _, j := range jobs {
			byID[j.ID] = j
		}
	}
	for i, it := range items {
		if res[i].Err != nil || res[i].Job != nil || it.create {
			continue
		}
		k := rk{it.p.Tenant, it.p.IdempotencyKey}
		id := jobOfKey[k]
		switch {
		case id == 0 || byID[id] == nil:
			res[i].Err = fmt.Errorf("idempotency key %q: job %d of the record: %w", it.p.IdempotencyKey, id, idemtype.ErrNotFound)
		case fps[k] != it.p.Fingerprint:
			res[i].Err = &idemtype.KeyReusedError{Key: it.p.IdempotencyKey, JobID: id}
		default:
			res[i] = store.JobInsertResult{Job: byID[id], Existing: true}
		}
	}
	_ = followers
	var settle []int64
	var queues []string
	for i, it := range items {
		if res[i].Err != nil || res[i].Existing || res[i].Job == nil {
			continue
		}
		if it.state == idemtype.StateCancelled && it.p.IdempotencyKey != "" {
			settle = append(settle, res[i].Job.ID)
		}
		if it.state == idemtype.StateAvailable {
			queues = append(queues, it.p.Queue)
		}
	}
	if len(settle) > 0 {
		if _, err := tx.Exec(ctx, s.sql(qSettleRecords), settle); err != nil {
			return nil, fmt.Errorf("settle records: %w", err)
		}
	}
	if err := s.notify(ctx, tx, queues); err != nil {
		return nil, err
	}
	return res, nil
}

// insertDeps locks the dependencies of the batch and decides each item's
// initial state; an item with an unknown dependency fails.
func (s *Store) insertDeps(ctx context.Context, tx pgx.Tx, items []*insertItem, res []store.JobInsertResult) error {
	var deps []int64
	for _, it := range items {
		deps = append(deps, it.p.DependsOn...)
	}
	type dep struct {
		tenant string
		state  idemtype.JobState
	}
	known := map[int64]dep{}
	if len(deps) > 0 {
		rows, err := tx.Query(ctx, s.sql(qLockDeps), deps)
		if err != nil {
			return fmt.Errorf("lock dependencies: %w", err)
		}
		var id int64
		var d dep
		var st string
		_, err = pgx.ForEachRow(rows, []any{&id, &d.tenant, &st}, func() error {
			d.state = idemtype.JobState(st)
			known[id] = d
			return nil
		})
		if err != nil {
			return fmt.Errorf("lock dependencies: %w", err)
		}
	}
	for i, it := range items {
		it.state = idemtype.StateAvailable
		if it.p.RunAt.After(it.now) {
			it.state = idemtype.StateScheduled
		}
		pending := false
		for _, id := range it.p.DependsOn {
			d, ok := known[id]
			if !ok || d.tenant != it.p.Tenant {
				res[i].Err = fmt.Errorf("%w: depends_on: job %d %w", idemtype.ErrInvalid, id, idemtype.ErrNotFound)
				break
			}
			switch {
			case d.state == idemtype.StateDead || d.state == idemtype.StateCancelled:
				if it.state != idemtype.StateCancelled {
					it.state = idemtype.StateCancelled
					it.lastErr = "dependency " + strconv.FormatInt(id, 10) + " is " + string(d.state)
				}
			case !d.state.Finished():
				pending = true
			}
		}
		if pending && it.state != idemtype.StateCancelled {
			it.state = idemtype.StatePending
		}
	}
	return nil
}

// lockPartitions takes the advisory locks of the FIFO partitions the batch
// inserts into (see qLockPartitions).
func (s *Store) lockPartitions(ctx context.Context, tx pgx.Tx, items []*insertItem, res []store.JobInsertResult) error {
	var parts []string
	for i, it := range items {
		if res[i].Err == nil && it.p.PartitionKey != "" {
			parts = append(parts, partitionName(it.p))
		}
	}
	if len(parts) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, qLockPartitions, s.partitionLockClass(), parts); err != nil {
		return fmt.Errorf("lock partitions: %w", err)
	}
	return nil
}

// partitionName identifies the FIFO partition of a job: (tenant, queue,
// partition key).
func partitionName(p *store.JobInsertParams) string {
	return p.Tenant + "\x1f" + p.Queue + "\x1f" + p.PartitionKey
}

// partitionLockClass is the first key of the schema's partition advisory locks.
func (s *Store) partitionLockClass() int32 {
	h := fnv.New32a()
	h.Write([]byte("idem-partition:" + s.schema))
	return int32(h.Sum32())
}

// allocateIDs takes ids for every item in item order, so ids follow the
// order of the batch even though keyed items are decided separately.
func (s *Store) allocateIDs(ctx context.Context, tx pgx.Tx, items []*insertItem, res []store.JobInsertResult) error {
	n := 0
	for i := range items {
		if res[i].Err == nil {
			n++
		}
	}
	rows, err := tx.Query(ctx, s.sql(qNextIDs), n)
	if err != nil {
		return fmt.Errorf("allocate ids: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return fmt.Errorf("allocate ids: %w", err)
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	k := 0
	for i, it := range items {
		if res[i].Err == nil {
			it.id = ids[k]
			k++
		}
	}
	return nil
}

// upsertRecords runs query (qInsertRecords or qUpsertRecords) for the
// leaders lead (sorted by tenant, key) and marks the items that got their
// key; it returns the others.
func (s *Store) upsertRecords(ctx context.Context, tx pgx.Tx, query string, items []*insertItem, lead []int,
	fps map[rk]string, jobOfKey map[rk]int64) ([]int, error) {
	var tenants, keys, fpsIn []string
	var jobIDs, ttls []int64
	var dedup []*time.Time
	var nows []time.Time
	byKey := map[rk]int{}
	for _, i := range lead {
		it := items[i]
		byKey[rk{it.p.Tenant, it.p.IdempotencyKey}] = i
		tenants = append(tenants, it.p.Tenant)
		keys = append(keys, it.p.IdempotencyKey)
		fpsIn = append(fpsIn, it.p.Fingerprint)
		jobIDs = append(jobIDs, it.id)
		nows = append(nows, it.now)
		ttls = append(ttls, micros(it.p.ResultTTL))
		if it.p.DedupWindow > 0 {
			d := it.now.Add(it.p.DedupWindow)
			dedup = append(dedup, &d)
		} else {
			dedup = append(dedup, nil)
		}
	}
	rows, err := tx.Query(ctx, s.sql(query), tenants, keys, fpsIn, jobIDs, dedup, nows, ttls)
	if err != nil {
		return nil, fmt.Errorf("upsert records: %w", err)
	}
	var t, k string
	var id int64
	_, err = pgx.ForEachRow(rows, []any{&t, &k, &id}, func() error {
		i := byKey[rk{t, k}]
		items[i].create = true
		fps[rk{t, k}] = items[i].p.Fingerprint
		jobOfKey[rk{t, k}] = items[i].id
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("upsert records: %w", err)
	}
	var rest []int
	for _, i := range lead {
		if !items[i].create {
			rest = append(rest, i)
		}
	}
	return rest, nil
}

// existingKeys reads the records of the leaders lead: a record in its
// dedup window gives the job it points to; the leaders whose record is
// missing or may be reopened are returned (in lead order).
func (s *Store) existingKeys(ctx context.Context, tx pgx.Tx, items []*insertItem, lead []int,
	fps map[rk]string, jobOfKey map[rk]int64) ([]int, error) {
	var tenants, keys []string
	var nows []time.Time
	for _, i := range lead {
		tenants = append(tenants, items[i].p.Tenant)
		keys = append(keys, items[i].p.IdempotencyKey)
		nows = append(nows, items[i].now)
	}
	if len(keys) == 0 {
		return nil, nil
	}
	rows, err := tx.Query(ctx, s.sql(qExistingRecords), tenants, keys, nows)
	if err != nil {
		return nil, fmt.Errorf("read records: %w", err)
	}
	open := map[rk]bool{}
	var t, k, fp string
	var id int64
	var reopen bool
	_, err = pgx.ForEachRow(rows, []any{&t, &k, &fp, &id, &reopen}, func() error {
		if !reopen {
			open[rk{t, k}] = true
			fps[rk{t, k}] = fp
			jobOfKey[rk{t, k}] = id
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read records: %w", err)
	}
	var rest []int
	for _, i := range lead {
		if !open[rk{items[i].p.Tenant, items[i].p.IdempotencyKey}] {
			rest = append(rest, i)
		}
	}
	return rest, nil
}

// insertArgs returns the item indexes and the arguments of qInsertJobs for
// the items marked create.
func insertArgs(items []*insertItem) ([]int, []any) {
	var (
		idx                                               []int
		ids, dedup, ttl                                   []int64
		tenants, queues, kinds, args, states, parts, keys []string
		deps, lastErrs                                    []string
		metas                                             []*string
		prios, maxes                                      []int32
		runAts, nows                                      []time.Time
	)
	for i, it := range items {
		if !it.create {
			continue
		}
		p := it.p
		idx = append(idx, i)
		ids = append(ids, it.id)
		tenants = append(tenants, p.Tenant)
		queues = append(queues, p.Queue)
		kinds = append(kinds, p.Kind)
		a := string(p.Args)
		if a == "" {
			a = "{}"
		}
		args = append(args, a)
		states = append(states, string(it.state))
		prios = append(prios, int32(p.Priority))
		maxes = append(maxes, int32(p.MaxAttempts))
		runAts = append(runAts, p.RunAt)
		parts = append(parts, p.PartitionKey)
		keys = append(keys, p.IdempotencyKey)
		deps = append(deps, int64sLiteral(p.DependsOn))
		metas = append(metas, nullText(p.Metadata))
		lastErrs = append(lastErrs, it.lastErr)
		dedup = append(dedup, micros(p.DedupWindow))
		ttl = append(ttl, micros(p.ResultTTL))
		nows = append(nows, it.now)
	}
	return idx, []any{ids, tenants, queues, kinds, args, states, prios, maxes,
		runAts, parts, keys, deps, metas, lastErrs, dedup, ttl, nows}
}

// insertJobs inserts the items marked create in one multi-row statement and
// returns the new rows by item index.
func (s *Store) insertJobs(ctx context.Context, tx pgx.Tx, items []*insertItem) (map[int]*idemtype.JobRow, error) {
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
		return nil, errClosed
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
