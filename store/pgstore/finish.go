package pgstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// JobFinishMany implements store.Jobs in one transaction. Small requests
// of concurrent callers share transactions (see group.go).
func (s *Store) JobFinishMany(ctx context.Context, p []*store.JobFinishParams) ([]error, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
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
	return s.finishPasses(ctx, tx, p)
}

// distinctJobs reports whether every finish names another job.
func distinctJobs(p []*store.JobFinishParams) bool {
	seen := make(map[int64]struct{}, len(p))
	for _, f := range p {
		if _, ok := seen[f.ID]; ok {
			return false
		}
		seen[f.ID] = struct{}{}
	}
	return true
}

// finishInOrder finishes a batch that names a job more than once (two
// callers' requests in one group, a client repeating itself) in one
// transaction on conn.
func (s *Store) finishInOrder(ctx context.Context, conn *pgxpool.Conn, p []*store.JobFinishParams) ([]error, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // after Commit: a no-op
	out, err := s.finishPasses(ctx, tx, p)
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
	}
	return out, nil
}

// finishPasses applies p inside tx in order, in passes that each name a
// job at most once: one UPDATE cannot, as it applies one of several rows
// matching a job, whichever comes first, and answers all of them as done.
// Each pass sees the ones before it, so a later finish of the same lease
// is a repeat or has lost its lease, as if it had come alone.
func (s *Store) finishPasses(ctx context.Context, tx pgx.Tx, p []*store.JobFinishParams) ([]error, error) {
	out := make([]error, 0, len(p))
	for start := 0; start < len(p); {
		end, seen := start, map[int64]bool{}
		for end < len(p) && !seen[p[end].ID] {
			seen[p[end].ID] = true
			end++
		}
		errs, err := s.finishTx(ctx, tx, p[start:end], false)
		if err != nil {
			return nil, err
		}
		out = append(out, errs...)
		start = end
	}
	return out, nil
}

// finishTx finishes p. When own is true, q is a connection outside any
// transaction: finishTx begins one with its first statements and commits
// it with its last (the caller rolls back when it returns an error). The
// common case takes two round trips: [BEGIN, qFinish, lock the pending
// dependants of the completions] and [complete records, settle records,
// notify, COMMIT]; releasing or cancelling dependants adds one each.
func (s *Store) finishTx(ctx context.Context, q dbtx, p []*store.JobFinishParams, own bool) ([]error, error) {
	out := make([]error, len(p))
	cols := newFinishColumns(p, out)
	if len(cols.ids) == 0 {
		return out, nil
	}
	finished, locked, err := s.finishJobs(ctx, q, cols, own)
	if err != nil {
		return nil, err
	}
	if err := s.finishRepeats(ctx, q, p, out, finished); err != nil {
		return nil, err
	}
	acked, err := s.ackCancels(ctx, q, p, out)
	if err != nil {
		return nil, err
	}
	plan := planAfterFinish(p, out, finished)
	plan.queues = append(plan.queues, acked...)
	if len(locked) > 0 {
		qs, err := s.releaseDependants(ctx, q, locked, plan.now)
		if err != nil {
			return nil, err
		}
		plan.queues = append(plan.queues, qs...)
	}
	cancelled, qs, err := s.cancelDependants(ctx, q, plan.killed, plan.now)
	if err != nil {
		return nil, err
	}
	plan.queues = append(plan.queues, qs...)
	plan.settle = append(plan.settle, cancelled...)
	if err := s.finishCommit(ctx, q, plan, own); err != nil {
		return nil, err
	}
	return out, nil
}

// finishColumns are the finishes of a call as the column arrays qFinish
// binds, plus the ids of the jobs being completed.
type finishColumns struct {
	ids, orig, durs                     []int64
	tokens, states, errs, outc, targets []string
	codes                               []string
	results                             []*string
	cached, snooze                      []bool
	runAts                              []*time.Time
	fins                                []time.Time
	statuses                            []int32
	locking                             []int64 // every job finished: their dependants are locked (finishJobs)
}

// newFinishColumns validates each finish (out[i] gets an item's error) and
// returns the valid ones as columns, in job id order: qFinish then locks the
// job rows in the order a key acquire locks them FOR SHARE
// (qRecordAcquireMany's lk), so the two never wait on each other in a cycle.
func newFinishColumns(p []*store.JobFinishParams, out []error) *finishColumns {
	c := &finishColumns{}
	order := make([]int, len(p))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return p[order[a]].ID < p[order[b]].ID })
	for _, i := range order {
		f := p[i]
		switch f.State {
		case idemtype.StateCompleted, idemtype.StateRetryable, idemtype.StateScheduled,
			idemtype.StateDead, idemtype.StateCancelled:
		default:
			out[i] = idemtype.Invalid("state", "cannot finish a job as %q", f.State)
			continue
		}
		if err := store.FinishCheck(f); err != nil {
			out[i] = fmt.Errorf("finish job %d: %w", f.ID, err)
			continue
		}
		c.add(f)
	}
	return c
}

func (c *finishColumns) add(f *store.JobFinishParams) {
	c.ids = append(c.ids, f.ID)
	c.tokens = append(c.tokens, f.LeaseToken)
	c.states = append(c.states, string(f.State))
	c.errs = append(c.errs, f.Error)
	c.results = append(c.results, nullText(f.Result))
	c.cached = append(c.cached, f.WasCached)
	c.orig = append(c.orig, f.OriginalJobID)
	c.runAts = append(c.runAts, nullTime(f.RunAt))
	c.snooze = append(c.snooze, f.Snooze)
	c.fins = append(c.fins, store.OrNow(f.FinishedAt))
	c.durs = append(c.durs, f.DurationMS)
	c.outc = append(c.outc, string(f.Outcome))
	c.statuses = append(c.statuses, int32(f.HTTPStatus))
	c.targets = append(c.targets, f.Target)
	c.codes = append(c.codes, f.ErrorCode)
	c.locking = append(c.locking, f.ID)
}

// finishJobs is the first round trip: (BEGIN,) finish the jobs still
// running under their token and lock the pending dependants of every job
// being finished (see qLockDependants): a completion releases them, a
// death or a cancel cancels or releases them (cancelDependants), a refused
// finish that ends a cancel's hold releases those waiting for any outcome
// (ackCancels). All are locked in this one statement, in id order, so no
// later step of the transaction locks a dependant this one did not: two
// finishes each locking dependants in two steps deadlocked (a completion's
// first, an acknowledged cancel's second). Locking those of a finish that
// turns out to be refused, or of a failure that retries, is harmless.
func (s *Store) finishJobs(ctx context.Context, q dbtx, c *finishColumns, own bool) (map[int64]finishedJob, []int64, error) {
	b := &pgx.Batch{}
	if own {
		b.Queue("BEGIN")
	}
	b.Queue(s.sql(qFinish), c.ids, c.tokens, c.states, c.errs, c.results, c.cached, c.orig, c.runAts,
		c.snooze, c.fins, c.durs, c.outc, c.statuses, c.targets, c.codes)
	if len(c.locking) > 0 {
		b.Queue(s.sql(qLockDependants), c.locking)
	}
	br := q.SendBatch(ctx, b)
	defer br.Close()
	if own {
		if _, err := br.Exec(); err != nil {
			return nil, nil, fmt.Errorf("begin: %w", err)
		}
	}
	finished, err := readFinished(br)
	if err != nil {
		return nil, nil, err
	}
	var locked []int64
	if len(c.locking) > 0 {
		rows, err := br.Query()
		if err != nil {
			return nil, nil, fmt.Errorf("lock dependants: %w", err)
		}
		if locked, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
			return nil, nil, fmt.Errorf("lock dependants: %w", err)
		}
	}
	return finished, locked, br.Close()
}

// readFinished reads the jobs qFinish finished, by id.
func readFinished(br pgx.BatchResults) (map[int64]finishedJob, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, fmt.Errorf("finish: %w", err)
	}
	finished := map[int64]finishedJob{}
	var id int64
	var st, queue string
	var runAt time.Time
	var keyed bool
	_, err = pgx.ForEachRow(rows, []any{&id, &st, &queue, &runAt, &keyed}, func() error {
		finished[id] = finishedJob{idemtype.JobState(st), queue, runAt.UTC(), keyed}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("finish: %w", err)
	}
	return finished, nil
}

// afterFinish is what the finished jobs leave to do: records to complete,
// records to settle, dependants to cancel, queues to notify.
type afterFinish struct {
	cIDs, cDurs    []int64
	cRes           [][]byte
	cHash          []string
	cComp, cDerive []bool
	cFins          []time.Time
	killed, settle []int64
	queues         []string
	now            time.Time // the latest finish time
}

// planAfterFinish collects the follow-up work of the jobs that finished.
func planAfterFinish(p []*store.JobFinishParams, out []error, finished map[int64]finishedJob) *afterFinish {
	a := &afterFinish{}
	for i, f := range p {
		d, ok := finished[f.ID]
		if out[i] != nil || !ok {
			continue
		}
		fin := store.OrNow(f.FinishedAt)
		if fin.After(a.now) {
			a.now = fin
		}
		// A completion stores its result in its record and settles the
		// record in the same write (qCompleteRecords), unless the record
		// can derive both from the job row (recordDerived); every other
		// finish of a keyed job settles it (qSettleRecords).
		completes := d.keyed && d.state == idemtype.StateCompleted && !f.WasCached
		if d.keyed && !completes {
			a.settle = append(a.settle, f.ID)
		}
		switch d.state {
		case idemtype.StateCompleted:
			if completes {
				a.addRecord(f, fin)
			}
		case idemtype.StateDead, idemtype.StateCancelled:
			a.killed = append(a.killed, f.ID)
		case idemtype.StateRetryable, idemtype.StateScheduled:
			if !d.runAt.After(fin) {
				a.queues = append(a.queues, d.queue)
			}
		}
	}
	return a
}

// addRecord adds the idempotency record a completion writes.
func (a *afterFinish) addRecord(f *store.JobFinishParams, fin time.Time) {
	res := f.RecordResult
	if res == nil {
		res = []byte{}
	}
	a.cIDs, a.cDurs = append(a.cIDs, f.ID), append(a.cDurs, f.DurationMS)
	a.cRes, a.cHash = append(a.cRes, res), append(a.cHash, f.ResultHash)
	a.cComp, a.cFins = append(a.cComp, f.RecordCompressed), append(a.cFins, fin)
	a.cDerive = append(a.cDerive, derivable(f))
}

// derivable reports whether the record result of completion f is what a
// record read derives from the completed job row (recordDerived): the
// job's result JSON itself (JSON null when the job has none), not
// compressed, with its SHA-256 as the hash. Only then may qCompleteRecords
// leave the record unwritten.
func derivable(f *store.JobFinishParams) bool {
	if f.RecordCompressed {
		return false
	}
	if len(f.Result) == 0 {
		if string(f.RecordResult) != "null" {
			return false
		}
	} else if !bytes.Equal(f.Result, f.RecordResult) {
		return false
	}
	sum := sha256.Sum256(f.RecordResult)
	return f.ResultHash == hex.EncodeToString(sum[:])
}

// finishCommit is the last round trip: records, notifications and COMMIT.
func (s *Store) finishCommit(ctx context.Context, q dbtx, a *afterFinish, own bool) error {
	b := &pgx.Batch{}
	if len(a.cIDs) > 0 {
		b.Queue(s.sql(qCompleteRecords), a.cIDs, a.cRes, a.cHash, a.cComp, a.cFins, a.cDurs, a.cDerive)
	}
	if len(a.settle) > 0 {
		b.Queue(s.sql(qSettleRecords), a.settle)
	}
	if len(a.queues) > 0 {
		b.Queue(qNotify, s.schema, a.queues)
	}
	if own {
		b.Queue("COMMIT")
	}
	if b.Len() > 0 {
		if err := q.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("records, notify, commit: %w", err)
		}
	}
	return nil
}

// releaseDependants makes the locked pending jobs whose dependencies have
// all completed available (or scheduled); it returns the queues that got
// available jobs.
func (s *Store) releaseDependants(ctx context.Context, q querier, locked []int64, now time.Time) ([]string, error) {
	_, queues, err := s.releaseLocked(ctx, q, locked, now)
	return queues, err
}

// releaseLocked is releaseDependants returning the ids of the jobs it
// released too.
func (s *Store) releaseLocked(ctx context.Context, q querier, locked []int64, now time.Time) ([]int64, []string, error) {
	rows, err := q.Query(ctx, s.sql(qReleaseDependants), locked, now)
	if err != nil {
		return nil, nil, fmt.Errorf("release dependants: %w", err)
	}
	var ids []int64
	var queues []string
	var id int64
	var qn, st string
	_, err = pgx.ForEachRow(rows, []any{&id, &qn, &st}, func() error {
		ids = append(ids, id)
		if st == string(idemtype.StateAvailable) {
			queues = append(queues, qn)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("release dependants: %w", err)
	}
	return ids, queues, nil
}

// finishRepeats sets the errors of items that did not match a running
// lease: nil for a repeat of the completion or failure that committed
// (store.FinishRepeats), ErrLeaseLost otherwise.
func (s *Store) finishRepeats(ctx context.Context, tx querier, p []*store.JobFinishParams, out []error, finished map[int64]finishedJob) error {
	var missed []int64
	for i, f := range p {
		f.Repeated = false // a retried transaction decides again
		if out[i] == nil {
			if _, ok := finished[f.ID]; !ok {
				missed = append(missed, f.ID)
			}
		}
	}
	if len(missed) == 0 {
		return nil
	}
	have, err := s.finishSeen(ctx, tx, missed)
	if err != nil {
		return err
	}
	for i, f := range p {
		if out[i] != nil {
			continue
		}
		if _, ok := finished[f.ID]; ok {
			continue
		}
		if store.FinishRepeats(f, have[f.ID]) {
			f.Repeated = true
			continue
		}
		out[i] = fmt.Errorf("finish job %d: %w", f.ID, idemtype.ErrLeaseLost)
	}
	return nil
}

// finishSeen reads the jobs ids as a repeated finish needs them
// (qFinishedRepeat).
func (s *Store) finishSeen(ctx context.Context, tx querier, ids []int64) (map[int64]*store.FinishSeen, error) {
	rows, err := tx.Query(ctx, s.sql(qFinishedRepeat), ids)
	if err != nil {
		return nil, fmt.Errorf("read finished jobs: %w", err)
	}
	have := map[int64]*store.FinishSeen{}
	var id int64
	var sn store.FinishSeen
	var state, outcome string
	var result *string
	_, err = pgx.ForEachRow(rows, []any{&id, &state, &sn.LeaseToken, &result, &sn.LastError, &sn.ErrorCode,
		&sn.Attempt, &sn.RowAttempt, &outcome, &sn.RowError}, func() error {
		seen := sn
		seen.State, seen.RowOutcome = idemtype.JobState(state), idemtype.Outcome(outcome)
		if result != nil {
			seen.Result = []byte(*result)
		}
		have[id] = &seen
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read finished jobs: %w", err)
	}
	return have, nil
}

// ackCancels ends the holds of the cancelled jobs whose finishes were
// refused (ErrLeaseLost) under the lease they hold (qJobCancel): the
// handler returned, so its slot and FIFO partition move on, and its
// dependants that wait for any outcome are released (releaseAfterHolds).
// The finish stays refused. It returns the queues to wake.
func (s *Store) ackCancels(ctx context.Context, q querier, p []*store.JobFinishParams, out []error) ([]string, error) {
	var ids []int64
	var tokens []string
	for i, f := range p {
		if errors.Is(out[i], idemtype.ErrLeaseLost) && f.LeaseToken != "" {
			ids, tokens = append(ids, f.ID), append(tokens, f.LeaseToken)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := q.Query(ctx, s.sql(qCancelAck), ids, tokens)
	if err != nil {
		return nil, fmt.Errorf("acknowledge cancels: %w", err)
	}
	ended, queues, err := collectHoldsEnded(rows)
	if err != nil {
		return nil, fmt.Errorf("acknowledge cancels: %w", err)
	}
	// The dependants are released as of the acknowledging finishes (the
	// latest, when several end holds), as SQLite releases each at its own:
	// a group may hold other callers' finishes at other times.
	acked := make(map[int64]bool, len(ended))
	for _, id := range ended {
		acked[id] = true
	}
	var now time.Time
	for i, f := range p {
		if at := store.OrNow(f.FinishedAt); acked[f.ID] && errors.Is(out[i], idemtype.ErrLeaseLost) && at.After(now) {
			now = at
		}
	}
	released, err := s.releaseAfterHolds(ctx, q, ended, now)
	if err != nil {
		return nil, err
	}
	return append(queues, released...), nil
}

// collectHoldsEnded reads the (id, queue) rows of qCancelAck and
// qCancelHoldEnd.
func collectHoldsEnded(rows pgx.Rows) (ids []int64, queues []string, err error) {
	var id int64
	var q string
	_, err = pgx.ForEachRow(rows, []any{&id, &q}, func() error {
		ids, queues = append(ids, id), append(queues, q)
		return nil
	})
	return ids, queues, err
}

// releaseAfterHolds releases the pending dependants that wait for any
// outcome (deps_any) of cancelled jobs whose holds just ended (their
// handlers returned, or their leases ended): qReleaseDependants waited
// for those holds. The dependants are locked in id order first, as a
// completion locks them. It returns the queues that got available jobs.
func (s *Store) releaseAfterHolds(ctx context.Context, q querier, ended []int64, now time.Time) ([]string, error) {
	if len(ended) == 0 {
		return nil, nil
	}
	rows, err := q.Query(ctx, s.sql(qLockDependants), ended)
	if err != nil {
		return nil, fmt.Errorf("lock dependants: %w", err)
	}
	locked, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil || len(locked) == 0 {
		if err != nil {
			err = fmt.Errorf("lock dependants: %w", err)
		}
		return nil, err
	}
	return s.releaseDependants(ctx, q, locked, now)
}

// afterFinal runs the side effects of jobs that reached a final state
// outside a finish (a cancel, a rescue to dead): their dependants are
// cancelled (transitively; those waiting for any outcome are released), and
// the records of all of them (and of the dependants cancelled) are settled.
// It returns the queues that got available jobs. (A finish releases the
// dependants of its completed jobs itself, in finishTx.)
func (s *Store) afterFinal(ctx context.Context, tx pgx.Tx, killed, settle []int64, now time.Time) ([]string, error) {
	_, queues, err := s.afterFinalCancelled(ctx, tx, killed, settle, now)
	return queues, err
}

// afterFinalCancelled is afterFinal returning the dependants it cancelled
// too.
func (s *Store) afterFinalCancelled(ctx context.Context, tx pgx.Tx, killed, settle []int64, now time.Time) ([]int64, []string, error) {
	var queues []string
	cancelled, qs, err := s.cancelDependants(ctx, tx, killed, now)
	if err != nil {
		return nil, nil, err
	}
	queues = append(queues, qs...)
	settle = append(settle, cancelled...)
	if len(settle) > 0 {
		if _, err := tx.Exec(ctx, s.sql(qSettleRecords), settle); err != nil {
			return nil, nil, fmt.Errorf("settle records: %w", err)
		}
	}
	return cancelled, queues, nil
}

// cancelDependants cancels the pending dependants of killed, transitively,
// and returns every job it cancelled. Dependants that wait for any outcome
// (deps_any) are released instead once all their dependencies have
// finished; it returns the queues that got available jobs. Each round first
// locks every pending dependant in id order (qLockDependants, as a
// completion does), so finishes of several dependencies of one job
// serialise on it without deadlocking, and the release sees the other
// finishes committed.
func (s *Store) cancelDependants(ctx context.Context, q querier, killed []int64, now time.Time) ([]int64, []string, error) {
	var all []int64
	var queues []string
	for len(killed) > 0 {
		rows, err := q.Query(ctx, s.sql(qLockDependants), killed)
		if err != nil {
			return nil, nil, fmt.Errorf("lock dependants: %w", err)
		}
		locked, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return nil, nil, fmt.Errorf("lock dependants: %w", err)
		}
		if len(locked) == 0 {
			break
		}
		rows, err = q.Query(ctx, s.sql(qCancelDependants), killed, now)
		if err != nil {
			return nil, nil, fmt.Errorf("cancel dependants: %w", err)
		}
		cancelled, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return nil, nil, fmt.Errorf("cancel dependants: %w", err)
		}
		if len(cancelled) < len(locked) {
			// The rest wait for any outcome: released once all finished.
			qs, err := s.releaseDependants(ctx, q, locked, now)
			if err != nil {
				return nil, nil, err
			}
			queues = append(queues, qs...)
		}
		all = append(all, cancelled...)
		killed = cancelled
	}
	return all, queues, nil
}
