package pgstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
	"github.com/jackc/pgx/v5"
)

// JobFinishMany implements store.Jobs in one transaction. Small requests
// of concurrent callers share transactions (see group.go).
func (s *Store) JobFinishMany(ctx context.Context, p []*store.JobFinishParams) ([]error, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	if len(p) == 0 {
		return []error{}, nil
	}
	if s.groups != nil && len(p) <= groupFinishMaxReq {
		return s.groupFinish(ctx, p)
	}
	out, err := s.finishDirect(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
	}
	return out, nil
}

// JobFinishManyTx is JobFinishMany inside the caller's transaction tx, so
// a handler's own writes and its job's completion commit together.
func (s *Store) JobFinishManyTx(ctx context.Context, tx pgx.Tx, p []*store.JobFinishParams) ([]error, error) {
	return s.finishTx(ctx, tx, p, false)
}

// finishTx finishes p. When own is true, q is a connection outside any
// transaction: finishTx begins one with its first statements and commits
// it with its last (the caller rolls back when it returns an error). The
// common case takes two round trips: [BEGIN, qFinish, lock the pending
// dependants of the completions] and [complete records, settle records,
// notify, COMMIT]; releasing or cancelling dependants adds one each.
func (s *Store) finishTx(ctx context.Context, q dbtx, p []*store.JobFinishParams, own bool) ([]error, error) {
	out := make([]error, len(p))
	var (
		ids, orig, durs                     []int64
		tokens, states, errs, outc, targets []string
		results                             []*string
		cached, snooze                      []bool
		runAts                              []*time.Time
		fins                                []time.Time
		statuses                            []int32
		completing                          []int64
	)
	for i, f := range p {
		switch f.State {
		case idemtype.StateCompleted, idemtype.StateRetryable, idemtype.StateScheduled,
			idemtype.StateDead, idemtype.StateCancelled:
		default:
			out[i] = idemtype.Invalid("state", "cannot finish a job as %q", f.State)
			continue
		}
		ids = append(ids, f.ID)
		tokens = append(tokens, f.LeaseToken)
		states = append(states, string(f.State))
		errs = append(errs, f.Error)
		results = append(results, nullText(f.Result))
		cached = append(cached, f.WasCached)
		orig = append(orig, f.OriginalJobID)
		runAts = append(runAts, nullTime(f.RunAt))
		snooze = append(snooze, f.Snooze)
		fins = append(fins, store.OrNow(f.FinishedAt))
		durs = append(durs, f.DurationMS)
		outc = append(outc, string(f.Outcome))
		statuses = append(statuses, int32(f.HTTPStatus))
		targets = append(targets, f.Target)
		if f.State == idemtype.StateCompleted {
			completing = append(completing, f.ID)
		}
	}
	if len(ids) == 0 {
		return out, nil
	}
	// First round trip. The pending dependants of the jobs being completed
	// are locked after the finish (see qLockDependants); locking those of
	// a completion that turns out to be refused is harmless.
	b := &pgx.Batch{}
	if own {
		b.Queue("BEGIN")
	}
	b.Queue(s.sql(qFinish), ids, tokens, states, errs, results, cached, orig, runAts,
		snooze, fins, durs, outc, statuses, targets)
	if len(completing) > 0 {
		b.Queue(s.sql(qLockDependants), completing)
	}
	finished := map[int64]finishedJob{}
	var locked []int64
	err := func() error {
		br := q.SendBatch(ctx, b)
		defer br.Close()
		if own {
			if _, err := br.Exec(); err != nil {
				return fmt.Errorf("begin: %w", err)
			}
		}
		rows, err := br.Query()
		if err != nil {
			return fmt.Errorf("finish: %w", err)
		}
		var id int64
		var st, queue string
		var runAt time.Time
		var keyed bool
		_, err = pgx.ForEachRow(rows, []any{&id, &st, &queue, &runAt, &keyed}, func() error {
			finished[id] = finishedJob{idemtype.JobState(st), queue, runAt.UTC(), keyed}
			return nil
		})
		if err != nil {
			return fmt.Errorf("finish: %w", err)
		}
		if len(completing) > 0 {
			rows, err := br.Query()
			if err != nil {
				return fmt.Errorf("lock dependants: %w", err)
			}
			if locked, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
				return fmt.Errorf("lock dependants: %w", err)
			}
		}
		return br.Close()
	}()
	if err != nil {
		return nil, err
	}
	if err := s.finishRepeats(ctx, q, p, out, finished); err != nil {
		return nil, err
	}
	// Records of completed jobs, then leases and zero windows of all.
	var cIDs, cDurs []int64
	var cRes [][]byte
	var cHash []string
	var cComp []bool
	var cFins []time.Time
	var killed, settle []int64
	var queues []string
	now := time.Time{}
	for i, f := range p {
		d, ok := finished[f.ID]
		if out[i] != nil || !ok {
			continue
		}
		if d.keyed {
			settle = append(settle, f.ID)
		}
		fin := store.OrNow(f.FinishedAt)
		if fin.After(now) {
			now = fin
		}
		switch d.state {
		case idemtype.StateCompleted:
			if d.keyed && !f.WasCached {
				cIDs, cDurs = append(cIDs, f.ID), append(cDurs, f.DurationMS)
				res := f.RecordResult
				if res == nil {
					res = []byte{}
				}
				cRes, cHash = append(cRes, res), append(cHash, f.ResultHash)
				cComp, cFins = append(cComp, f.RecordCompressed), append(cFins, fin)
			}
		case idemtype.StateDead, idemtype.StateCancelled:
			killed = append(killed, f.ID)
		case idemtype.StateRetryable, idemtype.StateScheduled:
			if !d.runAt.After(fin) {
				queues = append(queues, d.queue)
			}
		}
	}
	if len(locked) > 0 {
		qs, err := s.releaseDependants(ctx, q, locked, now)
		if err != nil {
			return nil, err
		}
		queues = append(queues, qs...)
	}
	cancelled, err := s.cancelDependants(ctx, q, killed, now)
	if err != nil {
		return nil, err
	}
	settle = append(settle, cancelled...)
	// Last round trip: records, notifications and COMMIT.
	b = &pgx.Batch{}
	if len(cIDs) > 0 {
		b.Queue(s.sql(qCompleteRecords), cIDs, cRes, cHash, cComp, cFins, cDurs)
	}
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
			return nil, fmt.Errorf("records, notify, commit: %w", err)
		}
	}
	return out, nil
}

// releaseDependants makes the locked pending jobs whose dependencies have
// all completed available (or scheduled); it returns the queues that got
// available jobs.
func (s *Store) releaseDependants(ctx context.Context, q querier, locked []int64, now time.Time) ([]string, error) {
	rows, err := q.Query(ctx, s.sql(qReleaseDependants), locked, now)
	if err != nil {
		return nil, fmt.Errorf("release dependants: %w", err)
	}
	var queues []string
	var qn, st string
	_, err = pgx.ForEachRow(rows, []any{&qn, &st}, func() error {
		if st == string(idemtype.StateAvailable) {
			queues = append(queues, qn)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("release dependants: %w", err)
	}
	return queues, nil
}

// finishRepeats sets the errors of items that did not match a running
// lease: nil for a repeated identical completion, ErrLeaseLost otherwise.
func (s *Store) finishRepeats(ctx context.Context, tx querier, p []*store.JobFinishParams, out []error, finished map[int64]finishedJob) error {
	var missed []int64
	for i, f := range p {
		if out[i] == nil {
			if _, ok := finished[f.ID]; !ok {
				missed = append(missed, f.ID)
			}
		}
	}
	if len(missed) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, s.sql(qFinishedRepeat), missed)
	if err != nil {
		return fmt.Errorf("read finished jobs: %w", err)
	}
	type seen struct {
		state, token string
		result       *string
	}
	have := map[int64]seen{}
	var id int64
	var sn seen
	_, err = pgx.ForEachRow(rows, []any{&id, &sn.state, &sn.token, &sn.result}, func() error {
		have[id] = sn
		return nil
	})
	if err != nil {
		return fmt.Errorf("read finished jobs: %w", err)
	}
	for i, f := range p {
		if out[i] != nil {
			continue
		}
		if _, ok := finished[f.ID]; ok {
			continue
		}
		h, ok := have[f.ID]
		var res []byte
		if ok && h.result != nil {
			res = []byte(*h.result)
		}
		if ok && f.State == idemtype.StateCompleted && h.state == string(idemtype.StateCompleted) &&
			h.token != "" && h.token == f.LeaseToken && jsonSame(res, f.Result) {
			continue
		}
		out[i] = fmt.Errorf("finish job %d: %w", f.ID, idemtype.ErrLeaseLost)
	}
	return nil
}

// afterFinal runs the side effects of jobs that reached a state: completed
// jobs release their dependants, dead and cancelled ones cancel theirs
// (transitively), and the records of all of them (and of the dependants
// cancelled) are settled. It returns the queues that got available jobs.
func (s *Store) afterFinal(ctx context.Context, tx pgx.Tx, completed, killed, settle []int64, now time.Time) ([]string, error) {
	var queues []string
	if len(completed) > 0 {
		rows, err := tx.Query(ctx, s.sql(qLockDependants), completed)
		if err != nil {
			return nil, fmt.Errorf("lock dependants: %w", err)
		}
		locked, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return nil, fmt.Errorf("lock dependants: %w", err)
		}
		if len(locked) > 0 {
			qs, err := s.releaseDependants(ctx, tx, locked, now)
			if err != nil {
				return nil, err
			}
			queues = append(queues, qs...)
		}
	}
	cancelled, err := s.cancelDependants(ctx, tx, killed, now)
	if err != nil {
		return nil, err
	}
	settle = append(settle, cancelled...)
	if len(settle) > 0 {
		if _, err := tx.Exec(ctx, s.sql(qSettleRecords), settle); err != nil {
			return nil, fmt.Errorf("settle records: %w", err)
		}
	}
	return queues, nil
}

// jsonSame reports whether a and b are the same JSON value (nil = none).
func jsonSame(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(x, y)
}

// cancelDependants cancels the pending dependants of killed, transitively,
// and returns every job it cancelled.
func (s *Store) cancelDependants(ctx context.Context, q querier, killed []int64, now time.Time) ([]int64, error) {
	var all []int64
	for len(killed) > 0 {
		rows, err := q.Query(ctx, s.sql(qCancelDependants), killed, now)
		if err != nil {
			return nil, fmt.Errorf("cancel dependants: %w", err)
		}
		killed, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return nil, fmt.Errorf("cancel dependants: %w", err)
		}
		all = append(all, killed...)
	}
	return all, nil
}
