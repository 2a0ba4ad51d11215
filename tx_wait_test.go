package idem_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/pgstore"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// storeTxEnv is the transactional environment of a store opened on its
// own (openLeaseStore): WriteTx on SQLite, the store's pool on PostgreSQL.
func storeTxEnv(t *testing.T, st store.Store) *txEnv[any] {
	t.Helper()
	switch s := st.(type) {
	case *sqlitestore.Store:
		return anyEnv(&txEnv[*sqlitestore.Tx]{inTx: s.WriteTx,
			exec: func(ctx context.Context, tx *sqlitestore.Tx, q string, args ...any) error {
				_, err := tx.ExecContext(ctx, q, args...)
				return err
			}})
	case *pgstore.Store:
		return anyEnv(&txEnv[pgx.Tx]{
			inTx: func(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
				return pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error { return fn(ctx, tx) })
			},
			exec: func(ctx context.Context, tx pgx.Tx, q string, args ...any) error {
				_, err := tx.Exec(ctx, q, args...)
				return err
			}})
	}
	t.Fatalf("no transactions on %T", st)
	return nil
}

// TestJobWaitAcrossClientsOnTxJob: one Client enqueues a job with EnqueueTx
// and waits for it; another Client on the same database (a second store)
// runs it and completes it with JobCompleteTx, then returns another result.
// The waiter sees the job completed with the committed result. On both
// stores.
func TestJobWaitAcrossClientsOnTxJob(t *testing.T) {
	t.Parallel()
	for _, kind := range leaseStoreKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st, openOther := openLeaseStore(t, kind)
			waiter, err := idem.NewClient(st, &idem.Config{Logger: quietLogger(), DisableMaintenance: true})
			if err != nil {
				t.Fatal(err)
			}
			other := openOther()
			workEnv, waitEnv := storeTxEnv(t, other), storeTxEnv(t, st)
			workers := idem.NewWorkers()
			workers.Handle("ship", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
				if err := workEnv.inTx(ctx, func(txCtx context.Context, tx any) error {
					return workEnv.complete(ctx, tx, fmt.Sprintf("shipped %d", j.ID))
				}); err != nil {
					return nil, err
				}
				return json.RawMessage(`"ignored"`), nil
			})
			worker, err := idem.NewClient(other, &idem.Config{Logger: quietLogger(), Workers: workers, Queues: queues(1),
				DisableMaintenance: true, PollInterval: 20 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			var res []idem.EnqueueResult
			if err := waitEnv.inTx(ctx, func(ctx context.Context, tx any) error {
				var err error
				res, err = waitEnv.enqueue(ctx, waiter, tx, []idem.EnqueueParams{{Kind: "ship"}})
				if err == nil && res[0].Err != nil {
					err = res[0].Err
				}
				return err
			}); err != nil {
				t.Fatal(err)
			}
			(&bundle{client: worker}).start(t)
			wctx, cancel := context.WithTimeout(ctx, waitTimeout)
			defer cancel()
			row, err := waiter.JobWait(wctx, res[0].Job.ID)
			want := fmt.Sprintf(`"shipped %d"`, res[0].Job.ID)
			if err != nil || row.State != idem.StateCompleted || string(row.Result) != want || row.Attempt != 1 {
				t.Fatalf("JobWait: %+v %v; want completed at attempt 1 with %s", row, err, want)
			}
		})
	}
}

// firstGet is a real store that tells when its first JobGet has returned.
type firstGet struct {
	store.Store
	once sync.Once
	got  chan struct{}
}

func (s *firstGet) JobGet(ctx context.Context, p *store.JobGetParams) (*idem.JobRow, error) {
	row, err := s.Store.JobGet(ctx, p)
	s.once.Do(func() { close(s.got) })
	return row, err
}

// TestJobWaitPollIsCapped: JobWaitMaxPoll caps the interval at which
// JobWait re-reads a job finished elsewhere, whatever the Client's
// PollInterval (a long one suits a client told of new jobs by
// notifications): a job completed by another client after the waiter's
// first read is seen within about a second, not after PollInterval.
func TestJobWaitPollIsCapped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, nil)
	st := &firstGet{Store: b.store, got: make(chan struct{})}
	waiter, err := idem.NewClient(st, &idem.Config{Logger: quietLogger(), DisableMaintenance: true, PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "remote"})
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		row *idem.JobRow
		err error
	}
	done := make(chan answer, 1)
	wctx, cancel := context.WithTimeout(ctx, 20*idem.JobWaitMaxPoll)
	defer cancel()
	go func() {
		row, err := waiter.JobWait(wctx, r.Job.ID)
		done <- answer{row, err}
	}()
	<-st.got // the waiter read the job unfinished
	jobs, err := b.client.Claim(ctx, idem.ClaimParams{Queues: []string{idem.DefaultQueue}, WorkerID: "w"})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %v %v", jobs, err)
	}
	if _, err := b.client.Complete(ctx, "", jobs[0].ID, jobs[0].LeaseToken, json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	a := <-done
	if a.err != nil || a.row.State != idem.StateCompleted {
		t.Fatalf("JobWait: %+v %v; want the completed job within %v of its completion", a.row, a.err, idem.JobWaitMaxPoll)
	}
}
