package sqlitestore

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// TestAnnounceAckThroughWriteTx: a cancel acknowledged by a finish written
// through a WriteTx (JobFinishManyTx) announces the partition's queue once
// the WriteTx committed, and not when it rolled back (the hold stays).
func TestAnnounceAckThroughWriteTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t, nil)
	now := time.Now().UTC()
	job := func() *store.JobInsertParams {
		return &store.JobInsertParams{Tenant: "t", Queue: "fifo", Kind: "k", Args: []byte("{}"), MaxAttempts: 3,
			RunAt: now, PartitionKey: "p"}
	}
	if _, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{job(), job()}, Now: now}); err != nil {
		t.Fatal(err)
	}
	jobs, err := s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"fifo"}, WorkerID: "w", Limit: 10,
		LeaseUntil: now.Add(time.Hour), Now: now})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %v %v", jobs, err)
	}
	a := jobs[0]
	if _, err := s.JobCancel(ctx, &store.JobCancelParams{ID: a.ID, Reason: "stop", Now: now}); err != nil {
		t.Fatal(err)
	}
	var got [][]string
	defer s.Announce(func(qs []string) { got = append(got, qs) })()
	finish := func(ctx context.Context, tx *Tx) error {
		errs, err := s.JobFinishManyTx(ctx, tx, []*store.JobFinishParams{{ID: a.ID, LeaseToken: a.LeaseToken,
			State: idemtype.StateCompleted, Outcome: idemtype.OutcomeCompleted, Result: []byte("1"), FinishedAt: now}})
		if err != nil {
			return err
		}
		if !errors.Is(errs[0], idemtype.ErrLeaseLost) {
			t.Errorf("finish of the cancelled job: %v, want ErrLeaseLost", errs[0])
		}
		return nil
	}
	rolledBack := errors.New("roll back")
	if err := s.WriteTx(ctx, func(ctx context.Context, tx *Tx) error {
		if err := finish(ctx, tx); err != nil {
			return err
		}
		return rolledBack
	}); !errors.Is(err, rolledBack) {
		t.Fatalf("WriteTx: %v", err)
	}
	if len(got) != 0 {
		t.Fatalf("a rolled-back acknowledgement announced %v", got)
	}
	if err := s.WriteTx(ctx, finish); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !slices.Equal(got[0], []string{"fifo"}) {
		t.Fatalf("announced %v after the committed acknowledgement, want [[fifo]]", got)
	}
}
