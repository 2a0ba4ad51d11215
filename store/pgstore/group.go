package pgstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/idem-dev/idem/store"
)

// Group commit.
//
// A durable commit costs one WAL flush; on most disks that, not the SQL, is
// what bounds single-job transactions per second. JobInsertMany and
// JobFinishMany therefore hand small requests to a few group workers. A
// worker takes the first request waiting, adds every other request already
// queued (up to groupMaxJobs items) and runs them all in one transaction —
// one round trip for keyless inserts and for requests with one key each
// (see insertDirect) — then answers each caller with its own slice of the
// results. Nothing waits on a timer: while one group
// commits, the next one gathers, so groups grow exactly as fast as callers
// arrive.
//
// Semantics are those of the callers' requests run one after the other:
//   - an item that fails (unknown dependency, key reused) fails alone, as
//     in any batch;
//   - a statement error (invalid JSON args, a deadlock) fails the shared
//     transaction: the worker then reruns each request in a transaction of
//     its own, so only the faulty request sees the error;
//   - a request whose key already existed is rerun alone in an explicit
//     transaction; nothing of it was inserted by the shared one;
//   - two requests inserting one idempotency key in one group are the
//     leader and a follower of one batch: one job, the second gets
//     Existing (or KeyReusedError);
//   - two finishes of the same job never share a group (the second waits
//     for the next one), so a repeated completion is judged against the
//     committed first one;
//   - a request whose caller gave up (context done) before its group ran is
//     dropped. Once the group ran, a caller that gave up cannot tell whether
//     its request committed — as with a lost commit acknowledgement.

const (
	// defaultGroupWorkers is the number of group transactions of each kind
	// (insert, finish) that may be in flight at once.
	defaultGroupWorkers = 2
	// groupMaxJobs caps the items of one group.
	groupMaxJobs = 1000
	// groupInsertMaxReq and groupFinishMaxReq: larger requests are batches
	// already and run directly.
	groupInsertMaxReq = 64
	groupFinishMaxReq = 64
)

// groups runs the group workers of a Store.
type groups struct {
	insert chan *insertReq
	finish chan *finishReq
	stop   chan struct{}
	wg     sync.WaitGroup
	// ctx bounds the shared transactions; Close cancels it, so a worker
	// stuck on an unresponsive database does not hold Close up.
	ctx    context.Context
	cancel context.CancelFunc
	// Counters of shared transactions run and the requests they held.
	insertGroups, insertReqs atomic.Int64
	finishGroups, finishReqs atomic.Int64
}

// insertReq is one caller's JobInsertMany waiting for its group.
type insertReq struct {
	ctx  context.Context
	p    *store.JobInsertManyParams
	done chan insertResp
}

type insertResp struct {
	res []store.JobInsertResult
	err error
}

// finishReq is one caller's JobFinishMany waiting for its group.
type finishReq struct {
	ctx  context.Context
	p    []*store.JobFinishParams
	done chan finishResp
}

type finishResp struct {
	errs []error
	err  error
}

// startGroups starts n workers of each kind.
func (s *Store) startGroups(n int) {
	g := &groups{
		insert: make(chan *insertReq, 4*groupMaxJobs),
		finish: make(chan *finishReq, 4*groupMaxJobs),
		stop:   make(chan struct{}),
	}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	s.groups = g
	for range n {
		g.wg.Add(2)
		go s.insertWorker()
		go s.finishWorker()
	}
}

// stopGroups stops the workers; callers still waiting get errClosed.
func (s *Store) stopGroups() {
	if s.groups == nil {
		return
	}
	close(s.groups.stop)
	s.groups.cancel()
	s.groups.wg.Wait()
}

// groupInsert queues p for an insert group and waits for its results.
func (s *Store) groupInsert(ctx context.Context, p *store.JobInsertManyParams) ([]store.JobInsertResult, error) {
	g := s.groups
	r := &insertReq{ctx: ctx, p: p, done: make(chan insertResp, 1)}
	select {
	case g.insert <- r:
	case <-ctx.Done():
		return nil, fmt.Errorf("insert jobs: %w", ctx.Err())
	case <-g.stop:
		return nil, errClosed
	}
	select {
	case resp := <-r.done:
		if resp.err != nil {
			return nil, fmt.Errorf("insert jobs: %w", resp.err)
		}
		return resp.res, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("insert jobs: %w", ctx.Err())
	case <-g.stop:
		return nil, errClosed
	}
}

// insertWorker runs insert groups until the store closes.
func (s *Store) insertWorker() {
	g := s.groups
	defer g.wg.Done()
	for {
		var first *insertReq
		select {
		case first = <-g.insert:
		case <-g.stop:
			return
		}
		group := []*insertReq{first}
		n := len(first.p.Jobs)
	fill:
		for n < groupMaxJobs {
			select {
			case r := <-g.insert:
				group = append(group, r)
				n += len(r.p.Jobs)
			default:
				break fill
			}
		}
		s.runInsertGroup(group)
	}
}

// runInsertGroup inserts the requests of a group in one transaction and
// answers each; after a statement error each request runs on its own.
func (s *Store) runInsertGroup(group []*insertReq) {
	live := group[:0]
	for _, r := range group {
		if err := r.ctx.Err(); err != nil {
			r.done <- insertResp{err: err}
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	s.groups.insertGroups.Add(1)
	s.groups.insertReqs.Add(int64(len(live)))
	ctx := s.groups.ctx
	var items []*insertItem
	var ends []int
	for _, r := range live {
		items = append(items, newItems(r.p)...)
		ends = append(ends, len(items))
	}
	res, err := s.insertDirect(ctx, items, ends)
	if err != nil && len(live) > 1 {
		for _, r := range live {
			res, err := s.insertDirect(ctx, newItems(r.p), nil)
			r.done <- insertResp{res: res, err: err}
		}
		return
	}
	k := 0
	for _, r := range live {
		if err != nil {
			r.done <- insertResp{err: err}
			continue
		}
		r.done <- insertResp{res: res[k : k+len(r.p.Jobs) : k+len(r.p.Jobs)]}
		k += len(r.p.Jobs)
	}
}

// groupFinish queues p for a finish group and waits for its results.
func (s *Store) groupFinish(ctx context.Context, p []*store.JobFinishParams) ([]error, error) {
	g := s.groups
	r := &finishReq{ctx: ctx, p: p, done: make(chan finishResp, 1)}
	select {
	case g.finish <- r:
	case <-ctx.Done():
		return nil, fmt.Errorf("finish jobs: %w", ctx.Err())
	case <-g.stop:
		return nil, errClosed
	}
	select {
	case resp := <-r.done:
		if resp.err != nil {
			return nil, fmt.Errorf("finish jobs: %w", resp.err)
		}
		return resp.errs, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("finish jobs: %w", ctx.Err())
	case <-g.stop:
		return nil, errClosed
	}
}

// finishWorker runs finish groups until the store closes. A request that
// finishes a job already in the group is kept for the next group.
func (s *Store) finishWorker() {
	g := s.groups
	defer g.wg.Done()
	var next *finishReq
	for {
		first := next
		next = nil
		if first == nil {
			select {
			case first = <-g.finish:
			case <-g.stop:
				return
			}
		}
		group := []*finishReq{first}
		seen := map[int64]bool{}
		n := 0
		add := func(r *finishReq) bool {
			for _, f := range r.p {
				if seen[f.ID] {
					return false
				}
			}
			for _, f := range r.p {
				seen[f.ID] = true
			}
			n += len(r.p)
			return true
		}
		add(first)
	fill:
		for n < groupMaxJobs {
			select {
			case r := <-g.finish:
				if !add(r) {
					next = r
					break fill
				}
				group = append(group, r)
			default:
				break fill
			}
		}
		s.runFinishGroup(group)
	}
}

// runFinishGroup finishes the requests of a group in one transaction and
// answers each; after a statement error each request runs on its own.
func (s *Store) runFinishGroup(group []*finishReq) {
	live := group[:0]
	for _, r := range group {
		if err := r.ctx.Err(); err != nil {
			r.done <- finishResp{err: err}
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	s.groups.finishGroups.Add(1)
	s.groups.finishReqs.Add(int64(len(live)))
	var all []*store.JobFinishParams
	for _, r := range live {
		all = append(all, r.p...)
	}
	ctx := s.groups.ctx
	errs, err := s.finishDirect(ctx, all)
	if err != nil && len(live) > 1 {
		for _, r := range live {
			errs, err := s.finishDirect(ctx, r.p)
			r.done <- finishResp{errs: errs, err: err}
		}
		return
	}
	k := 0
	for _, r := range live {
		if err != nil {
			r.done <- finishResp{err: err}
			continue
		}
		r.done <- finishResp{errs: errs[k : k+len(r.p) : k+len(r.p)]}
		k += len(r.p)
	}
}

// finishDirect finishes p in its own transaction (see finishTx).
func (s *Store) finishDirect(ctx context.Context, p []*store.JobFinishParams) ([]error, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	// A connection left inside a transaction is destroyed by Release.
	defer conn.Release()
	out, err := s.finishTx(ctx, conn, p, true)
	if err != nil {
		if conn.Conn().PgConn().TxStatus() != 'I' {
			_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		}
		return nil, err
	}
	return out, nil
}
