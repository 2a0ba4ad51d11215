package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// JobFinishMany implements store.Jobs.
func (s *Store) JobFinishMany(ctx context.Context, ps []*store.JobFinishParams) ([]error, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	errs := make([]error, len(ps))
	idList := finishIDs(ps) // outside the writer: it is the bottleneck
	var acked []string
	err := s.write(ctx, len(ps), func(t *wtx) error {
		t.released = nil
		if err := finishMany(t, ps, idList, errs); err != nil {
			return err
		}
		var err error
		acked, err = ackCancels(t, ps, errs)
		acked = append(acked, t.takeReleased()...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
	}
	s.announce(acked)
	return errs, nil
}

// finishIDs is the JSON list of the ids of ps.
func finishIDs(ps []*store.JobFinishParams) string {
	ids := make([]int64, len(ps))
	for i, p := range ps {
		ids[i] = p.ID
	}
	return jsonIDs(ids)
}

// finishMany ends the attempts of ps (whose ids idList lists) inside t,
// putting each item's error in errs; its own error fails the whole
// operation.
func finishMany(t *wtx, ps []*store.JobFinishParams, idList string, errs []error) error {
	for _, p := range ps {
		p.Repeated = false // repeatCompletion sets it; a retried write decides again
	}
	if accepted, index := store.FinishAccepted(ps, errs); index != nil {
		// Some finishes are refused (store.FinishCheck): finish the others.
		sub := make([]error, len(accepted))
		if len(accepted) > 0 {
			if err := finishMany(t, accepted, finishIDs(accepted), sub); err != nil {
				return err
			}
		}
		for k, i := range index {
			errs[i] = sub[k]
		}
		return nil
	}
	deps, err := withDependants(t, idList)
	if err != nil {
		return err
	}
	if distinctIDs(ps) {
		es, err := finishBatch(t, ps, deps)
		if err != nil {
			return err
		}
		copy(errs, es)
		return nil
	}
	for i, p := range ps {
		e, err := finishOne(t, p, deps[p.ID])
		if err != nil {
			return err
		}
		errs[i] = e
	}
	return nil
}

// releaseDependants releases, as of atUS, the pending dependants of job id
// whose dependencies are now satisfied (qDependantsRelease; only those
// that wait for any outcome when anyOnly: id died, was cancelled or its
// hold ended), and adds the queues of those it made available to
// t.released: the op announces them once committed (Store.announce), as
// its caller cannot see them.
func releaseDependants(t *wtx, id, atUS int64, anyOnly bool) error {
	rows, err := t.query(qDependantsReleaseQueues, atUS, id, boolInt(anyOnly))
	if err != nil {
		return fmt.Errorf("release dependants of job %d: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var q, state string
		if err := rows.Scan(&q, &state); err != nil {
			return fmt.Errorf("release dependants of job %d: %w", id, err)
		}
		if state == string(idemtype.StateAvailable) {
			t.released = append(t.released, q)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("release dependants of job %d: %w", id, err)
	}
	return nil
}

// ackCancels ends the holds of the cancelled jobs whose finishes were
// refused (ErrLeaseLost) under the lease they hold (qJobCancel): the
// handler returned, so its slot and FIFO partition move on, and its
// dependants that wait for any outcome are released. The finish stays
// refused. It returns the queues of the holds it ended, to announce once
// committed (Store.announce); those of the dependants it made available
// are in t.released.
func ackCancels(t *wtx, ps []*store.JobFinishParams, errs []error) ([]string, error) {
	var queues []string
	for i, p := range ps {
		if errors.Is(errs[i], idemtype.ErrLeaseLost) && p.LeaseToken != "" {
			var q string
			err := t.queryRow(qCancelAck, p.ID, p.LeaseToken).Scan(&q)
			if errors.Is(err, sql.ErrNoRows) {
				continue // no hold of this lease: a lease lost otherwise
			}
			if err != nil {
				return nil, fmt.Errorf("acknowledge cancel of job %d: %w", p.ID, err)
			}
			// Its dependants that wait for any outcome, released: their
			// queues go to t.released, which the op announces.
			if err := releaseDependants(t, p.ID, toUS(store.OrNow(p.FinishedAt)), true); err != nil {
				return nil, err
			}
			queues = append(queues, q)
		}
	}
	return queues, nil
}

// finishOne ends one attempt; it returns the item's error and an error that
// fails the whole operation.
func finishOne(t *wtx, p *store.JobFinishParams, hasDependants bool) (error, error) {
	fin := store.OrNow(p.FinishedAt)
	finUS := toUS(fin)
	var finished, runAt any
	if p.State.Finished() {
		finished = finUS
	}
	if (p.State == idemtype.StateRetryable || p.State == idemtype.StateScheduled) && !p.RunAt.IsZero() {
		runAt = toUS(p.RunAt)
	}
	var result any
	if p.State == idemtype.StateCompleted {
		result = nullBytes(p.Result)
	}
	var (
		tenant, key string
		dedupUS     int64
		ttlUS       int64
	)
	// The attempt row is written once, now that it ended, from the job row
	// as it still is (attempt number, started_at, worker); only while the
	// job runs under this token, so a repeat completion writes nothing. A
	// completion (not a delivery) writes none: the completed job row is
	// its record (docs/state-machine.md, "Attempts").
	if _, err := t.exec(qAttemptInsertFinish, p.ID, p.LeaseToken, finUS, p.DurationMS, string(p.Outcome),
		p.Error, p.Target, p.HTTPStatus); err != nil {
		return nil, fmt.Errorf("end attempt: %w", err)
	}
	err := t.queryRow(qJobFinish, string(p.State), finished, p.Error, result, boolInt(p.WasCached),
		p.OriginalJobID, runAt, boolInt(p.Snooze), p.ID, p.LeaseToken, p.ErrorCode, p.DurationMS).Scan(&tenant, &key, &dedupUS, &ttlUS)
	if errors.Is(err, sql.ErrNoRows) {
		return repeatCompletion(t, p)
	}
	if err != nil {
		return nil, err
	}
	return nil, finishTail(t, p, hasDependants, finishedRow{tenant: tenant, key: key, dedupUS: dedupUS, ttlUS: ttlUS})
}

// finishTail does what a finished job needs beyond its own row and attempt:
// its dependants and its idempotency record.
func finishTail(t *wtx, p *store.JobFinishParams, hasDependants bool, r finishedRow) error {
	fin := store.OrNow(p.FinishedAt)
	finUS := toUS(fin)
	tenant, key, dedupUS, ttlUS := r.tenant, r.key, r.dedupUS, r.ttlUS
	owner := store.JobOwner(p.ID)
	switch {
	case !hasDependants:
	case p.State == idemtype.StateCompleted:
		if err := releaseDependants(t, p.ID, finUS, false); err != nil {
			return err
		}
	case p.State == idemtype.StateDead || p.State == idemtype.StateCancelled:
		if _, err := cancelDependants(t, p.ID, p.State, finUS); err != nil {
			return err
		}
	}
	if key == "" {
		return nil
	}
	completes := p.State == idemtype.StateCompleted && !p.WasCached
	if p.State.Finished() && !completes {
		if err := onFinal(t, tenant, key, p.ID, dedupUS, ttlUS, fin); err != nil {
			return err
		}
	}
	if completes {
		// One write: the result, the lease release and (window 0) the
		// window's close, which onFinal does for the other final states.
		rec := p.RecordResult
		if rec == nil {
			rec = []byte{}
		}
		if _, err := t.exec(qKeyComplete, rec, p.ResultHash, boolInt(p.RecordCompressed), p.ID, finUS,
			ttlUS, p.DurationMS, tenant, key, owner, dedupUS); err != nil {
			return fmt.Errorf("complete record: %w", err)
		}
		return nil
	}
	if _, err := t.exec(qKeyLeaseRelease, tenant, key, owner); err != nil {
		return fmt.Errorf("release record lease: %w", err)
	}
	return nil
}

// jsonIDs formats ids as a JSON array (for json_each).
func jsonIDs(ids []int64) string {
	return "[" + formatIDs(ids) + "]"
}

// withDependants returns which jobs of the JSON id list have dependants.
func withDependants(t *wtx, idList string) (map[int64]bool, error) {
	var some bool
	if err := t.queryRow(qAnyDependants).Scan(&some); err != nil {
		return nil, fmt.Errorf("find dependants: %w", err)
	}
	if !some {
		return map[int64]bool{}, nil
	}
	ids, err := selectIDs(t, qHasDependants, idList)
	if err != nil {
		return nil, fmt.Errorf("find dependants: %w", err)
	}
	m := make(map[int64]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m, nil
}

// repeatCompletion decides a finish whose lease does not match: a repeat of
// the completion or failure that committed is accepted
// (store.FinishRepeats), anything else lost its lease.
func repeatCompletion(t *wtx, p *store.JobFinishParams) (error, error) {
	lost := fmt.Errorf("finish job %d: %w", p.ID, idemtype.ErrLeaseLost)
	if !store.Repeatable(p.State) {
		return lost, nil
	}
	var seen store.FinishSeen
	var state, outcome string
	err := t.queryRow(qJobFinishedCheck, p.ID).Scan(&state, &seen.LeaseToken, &seen.Result, &seen.LastError,
		&seen.ErrorCode, &seen.Attempt, &seen.RowAttempt, &outcome, &seen.RowError)
	if errors.Is(err, sql.ErrNoRows) {
		return lost, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read job %d for a repeated finish: %w", p.ID, err)
	}
	seen.State, seen.RowOutcome = idemtype.JobState(state), idemtype.Outcome(outcome)
	if store.FinishRepeats(p, &seen) {
		p.Repeated = true
		return nil, nil
	}
	return lost, nil
}

// onFinal updates the record of a job that reached a final state: a window-0
// key stops blocking (DedupUntil = finish), and a record without an expiry
// gets one.
func onFinal(t *wtx, tenant, key string, id, dedupUS, ttlUS int64, fin time.Time) error {
	if key == "" {
		return nil
	}
	q := qKeyFinalWindow
	if dedupUS == 0 {
		q = qKeyFinal
	}
	if _, err := t.exec(q, toUS(fin), tenant, key, id, ttlUS); err != nil {
		return fmt.Errorf("finalise record: %w", err)
	}
	return nil
}

// cancelledJob is what a cancel of a pending job returns of it for its
// record (onFinal).
type cancelledJob struct {
	id          int64
	tenant, key string
	dedup, ttl  int64
}

// cancelledJobs runs q, a cancel RETURNING id, tenant, idempotency_key,
// dedup_window_us, result_ttl_us, and reads what it returns.
func cancelledJobs(t *wtx, q string, args ...any) ([]cancelledJob, error) {
	rows, err := t.query(q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ks []cancelledJob
	for rows.Next() {
		var k cancelledJob
		if err := rows.Scan(&k.id, &k.tenant, &k.key, &k.dedup, &k.ttl); err != nil {
			return nil, err
		}
		ks = append(ks, k)
	}
	return ks, rows.Err()
}

// cancelDependants cancels the pending dependants of id, transitively, and
// releases those that wait for their dependencies' end whatever the outcome
// (deps_any) once all of theirs have finished. It returns the jobs it
// cancelled.
func cancelDependants(t *wtx, id int64, state idemtype.JobState, finUS int64) ([]int64, error) {
	type item struct {
		id    int64
		state idemtype.JobState
	}
	queue := []item{{id, state}}
	var all []int64
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		// Dependants that wait for any outcome count this one as finished.
		if err := releaseDependants(t, cur.id, finUS, true); err != nil {
			return nil, err
		}
		msg := fmt.Sprintf("dependency %d is %s", cur.id, cur.state)
		ks, err := cancelledJobs(t, qDependantsCancel, finUS, msg, cur.id)
		if err != nil {
			return nil, fmt.Errorf("cancel dependants: %w", err)
		}
		for _, k := range ks {
			queue = append(queue, item{k.id, idemtype.StateCancelled})
		}
		for _, k := range ks {
			if err := onFinal(t, k.tenant, k.key, k.id, k.dedup, k.ttl, fromUS(finUS)); err != nil {
				return nil, err
			}
			all = append(all, k.id)
		}
	}
	return all, nil
}
