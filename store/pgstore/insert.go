package pgstore

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// JobInsertMany implements store.Jobs. Small batches from concurrent
// callers are combined into shared transactions (see group.go).
func (s *Store) JobInsertMany(ctx context.Context, p *store.JobInsertManyParams) ([]store.JobInsertResult, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	if len(p.Jobs) == 0 {
		return []store.JobInsertResult{}, nil
	}
	if err := store.CheckInsertTenants(p.Jobs); err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	if s.groups != nil && len(p.Jobs) <= groupInsertMaxReq {
		return s.groupInsert(ctx, p)
	}
	out, err := s.insertDirect(ctx, newItems(p), true)
	if err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	return out, nil
}

// insertDirect inserts items, of one request or of a group of callers'
// requests, in their own transaction; each item's result is its own.
// Keyless batches take one round trip (insertSimple), large unpartitioned
// ones COPY (insertCopy); keyed ones one explicit transaction (insertOwn),
// which settles the keys that exist in it, large keyed ones with COPY in
// it first (insertKeyedCopy). (A one-shot implicit
// transaction for groups of one-key requests was measured no faster and
// removed: BENCHMARKS.md, "insert strategies".)
//
// keyedCopy allows insertKeyedCopy: for one caller's large batch, not for
// a group of callers' requests, where keys that exist (clients retrying)
// are common and would each cost the group a rollback to the savepoint.
func (s *Store) insertDirect(ctx context.Context, items []*insertItem, keyedCopy bool) ([]store.JobInsertResult, error) {
	if simpleItems(items) {
		if copyable(items) {
			return s.insertCopy(ctx, items)
		}
		return s.insertSimple(ctx, items)
	}
	conn, err := s.conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	if keyedCopy && keyedCopyable(items) {
		return s.insertKeyedCopy(ctx, conn, items)
	}
	return s.insertOwn(ctx, conn, items)
}

// insertOwn runs items in one explicit transaction on conn (modeOwn).
func (s *Store) insertOwn(ctx context.Context, conn *pgxpool.Conn, items []*insertItem) ([]store.JobInsertResult, error) {
	out, err := s.insertTx(ctx, conn, items, modeOwn)
	return rollbackOnError(ctx, conn, out, err)
}

// rollbackOnError returns out, or, when err is set, rolls back the
// transaction left open on conn (if any) and returns err.
func rollbackOnError(ctx context.Context, conn *pgxpool.Conn, out []store.JobInsertResult, err error) ([]store.JobInsertResult, error) {
	if err == nil {
		return out, nil
	}
	if conn.Conn().PgConn().TxStatus() != 'I' {
		_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
	}
	return nil, err
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
// commits. Notifications are sent at commit. A nil or empty batch is a
// no-op.
func (s *Store) JobInsertManyTx(ctx context.Context, tx pgx.Tx, p *store.JobInsertManyParams) ([]store.JobInsertResult, error) {
	if p == nil || len(p.Jobs) == 0 {
		return []store.JobInsertResult{}, nil
	}
	if err := store.CheckInsertTenants(p.Jobs); err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	return s.insertTx(ctx, tx, newItems(p), modeInTx)
}

// dbtx is what a transaction and a connection have in common: insertTx runs
// on the caller's pgx.Tx, or on a pooled connection where it opens and
// commits the transaction itself (own), pipelining BEGIN and COMMIT with
// its first and last statements.
type dbtx interface {
	querier
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// insertTx inserts items (each with its own now). When own is true, q is a
// connection outside any transaction: insertTx begins one with its first
// statements and commits it with its last (the caller rolls back when it
// returns an error).
//
// The common case takes two round trips: [BEGIN, partition locks, the
// combined insert] and [notify, COMMIT]. The combined insert (qInsertFast)
// allocates an id per item in item order, inserts the records of new keys
// (ON CONFLICT DO NOTHING) and the jobs of keyless items and of the keys it
// created. Keys that existed take the general path below, with the ids
// already allocated, in the same transaction.
func (s *Store) insertTx(ctx context.Context, q dbtx, items []*insertItem, mode txMode) ([]store.JobInsertResult, error) {
	k := newKeyedInsert(items)
	own := mode == modeOwn
	begin, err := s.insertStates(ctx, q, items, k.res, own)
	if err != nil {
		return nil, err
	}
	return s.insertKeyed(ctx, q, k, begin, own)
}

// newKeyedInsert is the state of a new insertTx of items.
func newKeyedInsert(items []*insertItem) *keyedInsert {
	return &keyedInsert{items: items, res: make([]store.JobInsertResult, len(items)),
		fps: map[rk]string{}, jobOfKey: map[rk]int64{}, byID: map[int64]*idemtype.JobRow{}}
}

// insertKeyed is insertTx once the items' states are set: the combined
// insert, the keys that existed, the duplicates' answers, and the last
// round trip (COMMIT when own). begin says whether BEGIN is still to be
// sent.
func (s *Store) insertKeyed(ctx context.Context, q dbtx, k *keyedInsert, begin, own bool) ([]store.JobInsertResult, error) {
	lead, rank := k.leaders()
	// Records decide the keyed items: the unique constraint on (tenant, key)
	// with ON CONFLICT, never a read followed by a write.
	if err := s.insertFast(ctx, q, k, rank, begin); err != nil {
		return nil, err
	}
	if pending := k.pending(lead); len(pending) > 0 {
		if err := s.insertExistingKeys(ctx, q, k, pending); err != nil {
			return nil, err
		}
	}
	if err := s.readKeyJobs(ctx, q, k); err != nil {
		return nil, err
	}
	k.answerDuplicates()
	if err := s.markDepsAny(ctx, q, k); err != nil {
		return nil, err
	}
	if err := s.insertCommit(ctx, q, k, own); err != nil {
		return nil, err
	}
	return k.res, nil
}

// markDepsAny flags the created jobs that wait for their dependencies'
// end whatever the outcome (DependsOnFinished), in insertTx's still open
// transaction.
func (s *Store) markDepsAny(ctx context.Context, q dbtx, k *keyedInsert) error {
	var ids []int64
	for i, it := range k.items {
		r := k.res[i]
		if it.p.DependsOnFinished && len(it.p.DependsOn) > 0 && r.Err == nil && r.Job != nil && !r.Existing {
			ids = append(ids, r.Job.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	if _, err := q.Exec(ctx, s.sql(qMarkDepsAny), ids); err != nil {
		return fmt.Errorf("mark dependants: %w", err)
	}
	return nil
}

// keyedInsert is the state of one insertTx: the items, their results, and
// what the records of their keys said.
type keyedInsert struct {
	items    []*insertItem
	res      []store.JobInsertResult
	fps      map[rk]string              // fingerprint of each key's record
	jobOfKey map[rk]int64               // job each key's record points to
	byID     map[int64]*idemtype.JobRow // jobs read or created, by id
}

// insertStates decides each item's initial state: by its dependencies
// (which need the transaction to have begun) or without. It reports
// whether BEGIN is still to be sent.
func (s *Store) insertStates(ctx context.Context, q dbtx, items []*insertItem, res []store.JobInsertResult, own bool) (bool, error) {
	if !hasDeps(items) {
		setInitialStates(items)
		return own, nil
	}
	if own {
		if _, err := q.Exec(ctx, "BEGIN"); err != nil {
			return false, fmt.Errorf("begin: %w", err)
		}
	}
	return false, s.insertDeps(ctx, q, items, res)
}

// leaders marks keyless items for creation and returns the first item of
// each key (its leader) in (tenant, key) order, with each item's rank
// (its position in that order from 1 for leaders, 0 for the others).
// Keys go in one order in every statement that locks records, so
// concurrent batches never deadlock.
func (k *keyedInsert) leaders() ([]int, []int) {
	keyed := make([]int, 0, len(k.items))
	for i, it := range k.items {
		if k.res[i].Err != nil {
			continue
		}
		if it.p.IdempotencyKey == "" {
			it.create = true
			continue
		}
		keyed = append(keyed, i)
	}
	// By (tenant, key) in byte order, then by position: the first item of
	// each run of one key is its leader.
	slices.SortFunc(keyed, func(a, b int) int {
		pa, pb := k.items[a].p, k.items[b].p
		return cmp.Or(strings.Compare(pa.Tenant, pb.Tenant), strings.Compare(pa.IdempotencyKey, pb.IdempotencyKey), cmp.Compare(a, b))
	})
	lead := make([]int, 0, len(keyed))
	rank := make([]int, len(k.items))
	for n, i := range keyed {
		if n > 0 {
			prev := k.items[lead[len(lead)-1]].p
			if p := k.items[i].p; p.Tenant == prev.Tenant && p.IdempotencyKey == prev.IdempotencyKey {
				continue
			}
		}
		lead = append(lead, i)
		rank[i] = len(lead)
	}
	return lead, rank
}

// pending returns the leaders whose key already had a record.
func (k *keyedInsert) pending(lead []int) []int {
	var pending []int
	for _, i := range lead {
		if k.res[i].Job == nil {
			pending = append(pending, i)
		}
	}
	return pending
}

// insertExistingKeys settles keys that exist: read them (a new statement
// sees the winners' committed rows). Open windows are duplicates; closed
// windows are reopened by the conditional upsert, which decides
// atomically; the reopened keys' jobs are then inserted.
func (s *Store) insertExistingKeys(ctx context.Context, q dbtx, k *keyedInsert, pending []int) error {
	var err error
	for range 3 {
		if pending, err = s.existingKeys(ctx, q, k.items, pending, k.fps, k.jobOfKey); err != nil {
			return err
		}
		if len(pending) == 0 {
			break
		}
		if pending, err = s.upsertRecords(ctx, q, qUpsertRecords, k.items, pending, k.fps, k.jobOfKey); err != nil {
			return err
		}
	}
	for _, i := range pending {
		k.res[i].Err = fmt.Errorf("idempotency key %q changed concurrently, try again", k.items[i].p.IdempotencyKey)
	}
	reopened := make([]*insertItem, len(k.items))
	for i, it := range k.items {
		if it.create && k.res[i].Job == nil && k.res[i].Err == nil {
			reopened[i] = it
		} else {
			reopened[i] = &insertItem{p: it.p}
		}
	}
	created, err := s.insertJobs(ctx, q, reopened)
	if err != nil {
		return err
	}
	for i, j := range created {
		k.res[i] = store.JobInsertResult{Job: j}
		k.byID[j.ID] = j
	}
	return nil
}

// readKeyJobs reads the jobs that the records of in-window keys point to.
func (s *Store) readKeyJobs(ctx context.Context, q dbtx, k *keyedInsert) error {
	var want []int64
	for i, it := range k.items {
		if k.res[i].Err == nil && k.res[i].Job == nil && !it.create {
			if id := k.jobOfKey[rk{it.p.Tenant, it.p.IdempotencyKey}]; id != 0 && k.byID[id] == nil {
				want = append(want, id)
			}
		}
	}
	if len(want) == 0 {
		return nil
	}
	rows, err := q.Query(ctx, s.sql(qJobsByID), want)
	if err != nil {
		return fmt.Errorf("read existing jobs: %w", err)
	}
	jobs, err := collectJobs(rows)
	if err != nil {
		return fmt.Errorf("read existing jobs: %w", err)
	}
	for _, j := range jobs {
		k.byID[j.ID] = j
	}
	return nil
}

// answerDuplicates answers the items whose key was in its window: the
// existing job, or KeyReusedError when the request differs.
func (k *keyedInsert) answerDuplicates() {
	for i, it := range k.items {
		if k.res[i].Err != nil || k.res[i].Job != nil || it.create {
			continue
		}
		key := rk{it.p.Tenant, it.p.IdempotencyKey}
		id := k.jobOfKey[key]
		switch {
		case id == 0 || k.byID[id] == nil:
			k.res[i].Err = fmt.Errorf("idempotency key %q: job %d of the record: %w", it.p.IdempotencyKey, id, idemtype.ErrNotFound)
		case k.fps[key] != it.p.Fingerprint:
			k.res[i].Err = &idemtype.KeyReusedError{Key: it.p.IdempotencyKey, JobID: id}
		default:
			k.res[i] = store.JobInsertResult{Job: k.byID[id], Existing: true}
		}
	}
}

// insertCommit is the last round trip: settle the records of jobs inserted
// cancelled, notify the queues of available jobs, and COMMIT when the
// transaction is ours.
func (s *Store) insertCommit(ctx context.Context, q dbtx, k *keyedInsert, own bool) error {
	var settle []int64
	var queues []string
	for i, it := range k.items {
		if k.res[i].Err != nil || k.res[i].Existing || k.res[i].Job == nil {
			continue
		}
		if it.state == idemtype.StateCancelled && it.p.IdempotencyKey != "" {
			settle = append(settle, k.res[i].Job.ID)
		}
		if it.state == idemtype.StateAvailable {
			queues = append(queues, it.p.Queue)
		}
	}
	b := &pgx.Batch{}
	if len(settle) > 0 {
		b.Queue(s.sql(qSettleRecords), settle)
	}
	if len(queues) > 0 {
		b.Queue(qNotify, s.schema, queues)
	}
	if own {
		b.Queue("COMMIT")
	}
	if b.Len() > 0 {
		if err := q.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("settle, notify, commit: %w", err)
		}
	}
	return nil
}

// txMode says who owns insertTx's transaction.
type txMode int

const (
	// modeInTx: the caller's transaction; no BEGIN, no COMMIT.
	modeInTx txMode = iota
	// modeOwn: a connection outside a transaction; BEGIN and COMMIT are
	// pipelined with the first and last statements.
	modeOwn
)

// hasDeps reports whether an item has dependencies.
func hasDeps(items []*insertItem) bool {
	for _, it := range items {
		if len(it.p.DependsOn) > 0 {
			return true
		}
	}
	return false
}

// setInitialStates sets the state of items without dependencies.
func setInitialStates(items []*insertItem) {
	for _, it := range items {
		it.state = idemtype.StateAvailable
		if it.p.RunAt.After(it.now) {
			it.state = idemtype.StateScheduled
		}
	}
}

// fastInsert is what insertFast sends for one batch: the items that have
// not failed (idx), their columns, and the partitions involved.
type fastInsert struct {
	idx        []int
	c          jobArrays
	fps        []string
	ranks      []int32
	dedupUntil []*time.Time
	locks      []string
}

// newFastInsert gathers the columns of the items that have not failed.
func (k *keyedInsert) newFastInsert(rank []int) *fastInsert {
	f := &fastInsert{}
	for i, it := range k.items {
		if k.res[i].Err != nil {
			continue
		}
		p := it.p
		f.idx = append(f.idx, i)
		f.c.add(it)
		f.fps = append(f.fps, p.Fingerprint)
		f.ranks = append(f.ranks, int32(rank[i]))
		var until *time.Time
		if p.DedupWindow > 0 {
			d := it.now.Add(p.DedupWindow)
			until = &d
		}
		f.dedupUntil = append(f.dedupUntil, until)
		if p.PartitionKey != "" {
			f.locks = append(f.locks, partitionName(p))
		}
	}
	return f
}

// fastBatch queues [BEGIN (when begin), partition locks, qInsertFast].
func (s *Store) fastBatch(f *fastInsert, begin bool) *pgx.Batch {
	b := &pgx.Batch{}
	if begin {
		b.Queue("BEGIN")
	}
	if len(f.locks) > 0 {
		b.Queue(qLockPartitions, s.partitionLockClass(), f.locks)
	}
	if len(f.idx) > 0 {
		c := &f.c
		b.Queue(s.sql(qInsertFast), c.tenants, c.queues, c.kinds, c.args, c.states, c.prios, c.maxes, c.runAts,
			c.parts, c.keys, c.deps, c.metas, c.lastErrs, c.dedupUs, c.ttlUs, c.nows, f.fps, f.dedupUntil, f.ranks,
			c.retries, c.timeoutUs)
	}
	return b
}

// insertFast runs [BEGIN (when begin), partition locks, qInsertFast] in
// one round trip for the items that have not failed. It allocates every such item's id; the
// jobs of keyless items and of leaders (rank > 0) whose record it created
// are inserted, their results set.
func (s *Store) insertFast(ctx context.Context, q dbtx, k *keyedInsert, rank []int, begin bool) error {
	f := k.newFastInsert(rank)
	b := s.fastBatch(f, begin)
	if b.Len() == 0 {
		return nil
	}
	br := q.SendBatch(ctx, b)
	defer br.Close()
	if begin {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
	}
	if len(f.locks) > 0 {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("lock partitions: %w", err)
		}
	}
	if len(f.idx) > 0 {
		rows, err := br.Query()
		if err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		if err := k.readFast(rows, f.idx); err != nil {
			return fmt.Errorf("insert: %w", err)
		}
	}
	return br.Close()
}

// readFast reads qInsertFast's (id, inserted) rows, one per item of idx in
// order: every item gets its id; the inserted ones their result.
func (k *keyedInsert) readFast(rows pgx.Rows, idx []int) error {
	n := 0
	var id int64
	var inserted bool
	_, err := pgx.ForEachRow(rows, []any{&id, &inserted}, func() error {
		if n >= len(idx) {
			return fmt.Errorf("%d rows for %d jobs", n+1, len(idx))
		}
		i := idx[n]
		n++
		it := k.items[i]
		it.id = id
		if !inserted {
			return nil
		}
		it.create = true
		j := builtJob(it)
		k.res[i] = store.JobInsertResult{Job: j}
		k.byID[id] = j
		if it.p.IdempotencyKey != "" {
			key := rk{it.p.Tenant, it.p.IdempotencyKey}
			k.fps[key] = it.p.Fingerprint
			k.jobOfKey[key] = id
		}
		return nil
	})
	if err != nil {
		return err
	}
	if n != len(idx) {
		return fmt.Errorf("%d rows for %d jobs", n, len(idx))
	}
	return nil
}

// builtJob is the row qInsertFast inserted for it, as scanJob would read it
// back: times at microsecond precision in UTC (pgx sends times truncated
// to microseconds), json columns byte for byte.
func builtJob(it *insertItem) *idemtype.JobRow {
	p := it.p
	args := p.Args
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	j := &idemtype.JobRow{
		ID: it.id, Tenant: p.Tenant, Queue: p.Queue, Kind: p.Kind,
		Args:         append(json.RawMessage(nil), args...),
		State:        it.state,
		Priority:     p.Priority,
		MaxAttempts:  p.MaxAttempts,
		RunAt:        p.RunAt.Truncate(time.Microsecond).UTC(),
		CreatedAt:    it.now.Truncate(time.Microsecond).UTC(),
		PartitionKey: p.PartitionKey, IdempotencyKey: p.IdempotencyKey,
		LastError: it.lastErr, Timeout: p.Timeout.Truncate(time.Microsecond),
	}
	if len(p.DependsOn) > 0 {
		j.DependsOn = append([]int64(nil), p.DependsOn...)
	}
	if len(p.Metadata) > 0 {
		j.Metadata = append(json.RawMessage(nil), p.Metadata...)
	}
	if len(p.RetryPolicy) > 0 {
		j.RetryPolicy = append(json.RawMessage(nil), p.RetryPolicy...)
	}
	if it.state == idemtype.StateCancelled {
		fin := j.CreatedAt
		j.FinishedAt = &fin
	}
	return j
}

// insertDeps locks the dependencies of the batch and decides each item's
// initial state; an item with an unknown dependency fails.
func (s *Store) insertDeps(ctx context.Context, tx querier, items []*insertItem, res []store.JobInsertResult) error {
	var deps []int64
	for _, it := range items {
		deps = append(deps, it.p.DependsOn...)
	}
	type dep struct {
		tenant string
		state  idemtype.JobState
		held   bool // cancelled, its handler may still run (qLockDeps)
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
		_, err = pgx.ForEachRow(rows, []any{&id, &d.tenant, &st, &d.held}, func() error {
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
				res[i].Err = store.UnknownDependency(id)
				break
			}
			switch {
			case d.state == idemtype.StateDead || d.state == idemtype.StateCancelled:
				if !it.p.DependsOnFinished && it.state != idemtype.StateCancelled {
					it.state = idemtype.StateCancelled
					it.lastErr = "dependency " + strconv.FormatInt(id, 10) + " is " + string(d.state)
				} else if d.held {
					pending = true // its handler may still run
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

// upsertRecords runs query (qUpsertRecords) for the
// leaders lead (sorted by tenant, key) and marks the items that got their
// key; it returns the others.
func (s *Store) upsertRecords(ctx context.Context, tx querier, query string, items []*insertItem, lead []int,
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
	rows, err := tx.Query(ctx, s.sql(query), tenants, keys, fpsIn, jobIDs, dedup, nows, ttls, s.callerClock)
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
func (s *Store) existingKeys(ctx context.Context, tx querier, items []*insertItem, lead []int,
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
