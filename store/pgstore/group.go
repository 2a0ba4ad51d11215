package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/idem-dev/idem/internal/batch"
	"github.com/idem-dev/idem/store"
)

// Group commit.
//
// A durable commit costs one WAL flush; on most disks that, not the SQL, is
// what bounds single-job transactions per second. JobInsertMany and
// JobFinishMany therefore hand small requests to a few group workers
// (internal/batch Runners). A
// worker takes the first request waiting, adds every other request already
// queued (up to groupMaxJobs items) and runs them all in one transaction —
// one round trip for keyless inserts (see insertDirect) — then answers each
// caller with its own slice of the results. Nothing waits on a timer: while one group
// commits, the next one gathers, so groups grow exactly as fast as callers
// arrive.
//
// Semantics are those of the callers' requests run one after the other:
//   - an item that fails (unknown dependency, key reused) fails alone, as
//     in any batch;
//   - a statement error (invalid JSON args, a deadlock) fails the shared
//     transaction: the worker then reruns each request in a transaction of
//     its own, so only the faulty request sees the error;
//   - a request whose key already existed gets the existing job (or
//     KeyReusedError), settled in the shared transaction;
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

// groups runs the group workers of a Store: two batch.Runners, whose
// gathering is described above; runInsertGroup and runFinishGroup run one
// group each.
type groups struct {
	insert *batch.Runner[*store.JobInsertManyParams, []store.JobInsertResult]
	finish *batch.Runner[[]*store.JobFinishParams, []error]
	// ctx bounds the shared transactions; Close cancels it, so a worker
	// stuck on an unresponsive database does not hold Close up.
	ctx    context.Context
	cancel context.CancelFunc
	// Counters of shared transactions run and the requests they held.
	insertGroups, insertReqs atomic.Int64
	finishGroups, finishReqs atomic.Int64
}

type (
	insertReq = batch.Call[*store.JobInsertManyParams, []store.JobInsertResult]
	finishReq = batch.Call[[]*store.JobFinishParams, []error]
)

// startGroups starts n workers of each kind.
func (s *Store) startGroups(n int) {
	g := &groups{}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	g.insert = batch.New(&batch.Config[*store.JobInsertManyParams]{
		MaxCount: groupMaxJobs, MaxWeight: groupMaxJobs, Runners: n, ReturnOnCancel: true,
	}, s.runInsertGroup)
	g.finish = batch.New(&batch.Config[[]*store.JobFinishParams]{
		MaxCount: groupMaxJobs, MaxWeight: groupMaxJobs, Runners: n, ReturnOnCancel: true,
		Admit: admitDistinctJobs,
	}, s.runFinishGroup)
	s.groups = g
	g.insert.Start()
	g.finish.Start()
}

// admitDistinctJobs keeps two finishes of one job out of one group: the
// second waits for the next group.
func admitDistinctJobs() func([]*store.JobFinishParams) bool {
	seen := map[int64]bool{}
	return func(p []*store.JobFinishParams) bool {
		for _, f := range p {
			if seen[f.ID] {
				return false
			}
		}
		for _, f := range p {
			seen[f.ID] = true
		}
		return true
	}
}

// stopGroups stops the workers; callers still waiting get store.ErrClosed.
func (s *Store) stopGroups() {
	if s.groups == nil {
		return
	}
	s.groups.cancel()
	s.groups.insert.Stop()
	s.groups.finish.Stop()
}

// groupErr maps a group's error for its caller.
func (s *Store) groupErr(op string, err error) error {
	if errors.Is(err, batch.ErrStopped) || (err != nil && s.groups.ctx.Err() != nil) {
		return store.ErrClosed
	}
	return fmt.Errorf("%s: %w", op, err)
}

// groupInsert queues p for an insert group and waits for its results.
func (s *Store) groupInsert(ctx context.Context, p *store.JobInsertManyParams) ([]store.JobInsertResult, error) {
	res, err := s.groups.insert.Submit(ctx, p, len(p.Jobs))
	if err != nil {
		return nil, s.groupErr("insert jobs", err)
	}
	return res, nil
}

// runInsertGroup inserts the requests of a group in one transaction and
// answers each; after a statement error each request runs on its own.
func (s *Store) runInsertGroup(live []*insertReq) {
	s.groups.insertGroups.Add(1)
	s.groups.insertReqs.Add(int64(len(live)))
	ctx := s.groups.ctx
	var items []*insertItem
	for _, r := range live {
		items = append(items, newItems(r.Req)...)
	}
	res, err := s.insertDirect(ctx, items, false)
	if err != nil && len(live) > 1 {
		for _, r := range live {
			r.Answer(s.insertDirect(ctx, newItems(r.Req), false))
		}
		return
	}
	k := 0
	for _, r := range live {
		if err != nil {
			r.Answer(nil, err)
			continue
		}
		n := len(r.Req.Jobs)
		r.Answer(res[k:k+n:k+n], nil)
		k += n
	}
}

// groupFinish queues p for a finish group and waits for its results.
func (s *Store) groupFinish(ctx context.Context, p []*store.JobFinishParams) ([]error, error) {
	errs, err := s.groups.finish.Submit(ctx, p, len(p))
	if err != nil {
		return nil, s.groupErr("finish jobs", err)
	}
	return errs, nil
}

// runFinishGroup finishes the requests of a group in one transaction and
// answers each; after a statement error each request runs on its own.
func (s *Store) runFinishGroup(live []*finishReq) {
	s.groups.finishGroups.Add(1)
	s.groups.finishReqs.Add(int64(len(live)))
	var all []*store.JobFinishParams
	for _, r := range live {
		all = append(all, r.Req...)
	}
	ctx := s.groups.ctx
	errs, err := s.finishDirect(ctx, all)
	if err != nil && len(live) > 1 {
		for _, r := range live {
			r.Answer(s.finishDirect(ctx, r.Req))
		}
		return
	}
	k := 0
	for _, r := range live {
		if err != nil {
			r.Answer(nil, err)
			continue
		}
		n := len(r.Req)
		r.Answer(errs[k:k+n:k+n], nil)
		k += n
	}
}

// finishDirect finishes p in its own transaction (see finishTx).
func (s *Store) finishDirect(ctx context.Context, p []*store.JobFinishParams) ([]error, error) {
	conn, err := s.conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	if !distinctJobs(p) {
		return s.finishInOrder(ctx, conn, p)
	}
	out, err := s.finishTx(ctx, conn, p, true)
	if err != nil {
		if conn.Conn().PgConn().TxStatus() != 'I' {
			_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		}
		return nil, err
	}
	return out, nil
}
