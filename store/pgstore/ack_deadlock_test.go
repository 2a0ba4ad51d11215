package pgstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store"
)

// TestAckAfterCompletionDoesNotDeadlock: two finishes in two transactions,
// each completing one job and acknowledging the cancel of another (the
// refused finish that ends the cancel's hold; written cancelled, as a
// handler that stopped on its cancel writes it), whose dependants waiting
// for any outcome cross: d1 waits for x1 and a1, d2 for x2 and a2; T1
// completes x1 and acknowledges a2, T2 completes x2 and acknowledges a1.
// A gate transaction holding a1 and a2 lines the two up after their
// completions. Each must lock every dependant it will touch in one
// statement: before, each locked its completion's dependant first and the
// acknowledged job's later, and the two deadlocked (SQLSTATE 40P01).
func TestAckAfterCompletionDoesNotDeadlock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStoreCfg(t, 6, &Config{CallerClock: true, GroupCommitWorkers: -1})
	now := time.Now().Truncate(time.Microsecond)
	insert := func(p *store.JobInsertParams) *idemtype.JobRow {
		t.Helper()
		res, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{p}, Now: now})
		if err != nil || res[0].Err != nil {
			t.Fatalf("insert: %v %+v", err, res)
		}
		return res[0].Job
	}
	a1, a2, x1, x2 := insert(benchJob()), insert(benchJob()), insert(benchJob()), insert(benchJob())
	after := func(deps ...*idemtype.JobRow) *idemtype.JobRow {
		p := benchJob()
		p.Queue, p.DependsOnFinished = "after", true
		for _, d := range deps {
			p.DependsOn = append(p.DependsOn, d.ID)
		}
		return insert(p)
	}
	d1, d2 := after(x1, a1), after(x2, a2)
	now = time.Now().Truncate(time.Microsecond) // every run_at has passed
	claimed, err := s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"default"}, WorkerID: "w", Limit: 4,
		LeaseUntil: now.Add(time.Minute), Now: now})
	if err != nil || len(claimed) != 4 {
		t.Fatalf("claim: %d jobs, %v", len(claimed), err)
	}
	lease := map[int64]*idemtype.JobRow{}
	for _, j := range claimed {
		lease[j.ID] = j
	}
	for _, a := range []*idemtype.JobRow{a1, a2} {
		if _, err := s.JobCancel(ctx, &store.JobCancelParams{ID: a.ID, Reason: "stop", Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	fin := func(id int64) *store.JobFinishParams {
		j := lease[id]
		return &store.JobFinishParams{ID: id, LeaseToken: j.LeaseToken, State: idemtype.StateCompleted,
			Outcome: idemtype.OutcomeCompleted, Result: []byte(`1`), FinishedAt: now.Add(time.Second)}
	}

	gate, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = gate.Rollback(ctx) }()
	if _, err := gate.Exec(ctx, s.sql(`SELECT id FROM {schema}.jobs WHERE id = ANY($1) ORDER BY id FOR UPDATE`),
		[]int64{a1.ID, a2.ID}); err != nil {
		t.Fatal(err)
	}
	run := func(done chan<- error, complete, ack int64) {
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			done <- err
			return
		}
		defer func() { _ = tx.Rollback(ctx) }()
		// The acknowledgement as a handler that stopped on its cancel
		// writes it: cancelled.
		a := fin(ack)
		a.State, a.Outcome, a.Result = idemtype.StateCancelled, idemtype.OutcomeCancelled, nil
		errs, err := s.JobFinishManyTx(ctx, tx, []*store.JobFinishParams{fin(complete), a})
		if err == nil && (errs[0] != nil || !errors.Is(errs[1], idemtype.ErrLeaseLost)) {
			err = errors.Join(errors.New("finishes want nil and ErrLeaseLost"), errs[0], errs[1])
		}
		if err == nil {
			err = tx.Commit(ctx)
		}
		done <- err
	}
	done := make(chan error, 2)
	go run(done, x1.ID, a2.ID)
	go run(done, x2.ID, a1.ID)
	// Both wait for the gate (their acknowledgements' rows), or one waits
	// for the other's dependants: either way two sessions wait for locks.
	dbtest.UntilLocks(t, s.pool, true, nil, "the two finishes never waited", `SELECT count(*) >= 2 FROM pg_locks
WHERE locktype IN ('transactionid', 'tuple') AND NOT granted`)
	if err := gate.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-done; err != nil {
			var pgErr interface{ SQLState() string }
			if errors.As(err, &pgErr) && pgErr.SQLState() == "40P01" {
				t.Fatalf("the finishes deadlocked: %v", err)
			}
			t.Fatal(err)
		}
	}
	for _, d := range []*idemtype.JobRow{d1, d2} {
		got, err := s.JobGet(ctx, &store.JobGetParams{ID: d.ID})
		if err != nil || got.State != idemtype.StateAvailable {
			t.Fatalf("dependant %d: %v %v, want available", d.ID, got.State, err)
		}
	}
}
