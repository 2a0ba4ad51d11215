package idem

import (
	"context"
	"errors"
	"fmt"

	"github.com/idem-dev/idem/internal/executor"
	"github.com/idem-dev/idem/store"
)

// TxStore is implemented by stores whose writes can join a caller's
// transaction of type TTx: pgstore.Store with pgx.Tx, sqlitestore.Store
// with *sqlitestore.Tx (from its WriteTx).
type TxStore[TTx any] interface {
	JobInsertManyTx(ctx context.Context, tx TTx, p *store.JobInsertManyParams) ([]store.JobInsertResult, error)
	JobFinishManyTx(ctx context.Context, tx TTx, p []*store.JobFinishParams) ([]error, error)
}

// ErrNoTxSupport means the client's store cannot join a transaction of that type.
var ErrNoTxSupport = errors.New("store does not support transactions of this type")

// EnqueueTx inserts jobs inside the caller's transaction tx: they exist if and
// only if tx commits. Validation, errors and results are EnqueueMany's. Local workers are woken after the call, so a worker may
// look before the commit; polling (or LISTEN/NOTIFY) picks the jobs up once
// committed. The Observer's EventEnqueued and EventDeduplicated are reported
// at the call as well (idem cannot see the caller's commit): the jobs of a
// transaction that then rolls back were reported although they never
// existed; count committed jobs from the caller's side when that matters.
func EnqueueTx[TTx any](ctx context.Context, c *Client, tx TTx, items []EnqueueParams) ([]EnqueueResult, error) {
	ts, ok := c.store.(TxStore[TTx])
	if !ok {
		return nil, fmt.Errorf("enqueue tx: %w", ErrNoTxSupport)
	}
	return c.enqueueMany(ctx, items, func(ctx context.Context, p *store.JobInsertManyParams) ([]store.JobInsertResult, error) {
		return ts.JobInsertManyTx(ctx, tx, p)
	})
}

// JobCompleteTx completes the job whose handler ctx belongs to, inside the
// caller's transaction tx: the job is completed if and only if tx commits, so
// a handler's own writes and its completion commit together (exactly-once
// effects). The handler should return the same result afterwards; the
// runtime's own completion then finds the job completed and does nothing.
// Once tx has committed the completion stands whatever the handler does
// next: an error, another result or a panic is logged, and the job stays
// completed with the result that committed, reported to the Observer once
// as completed. When tx rolls back, what the handler returns is the
// attempt's outcome, as if JobCompleteTx had not been called. After the
// commit the job no longer runs under the handler's lease: a heartbeat
// before the handler returns cancels its context (cause ErrLeaseLost), so
// work after the commit should not depend on that context.
func JobCompleteTx[TTx any](ctx context.Context, tx TTx, result any) error {
	ex, row, ok := executor.JobFromContext(ctx)
	if !ok {
		return errors.New("job complete tx: ctx is not a job handler's context")
	}
	ts, ok := ex.Store().(TxStore[TTx])
	if !ok {
		return fmt.Errorf("job complete tx: %w", ErrNoTxSupport)
	}
	res, err := marshalResult(result)
	if err != nil {
		return err
	}
	fin := &store.JobFinishParams{ID: row.ID, LeaseToken: row.LeaseToken}
	ex.SetOutcome(fin, row, res, nil)
	now := ex.Now()
	fin.FinishedAt = now
	if row.StartedAt != nil {
		fin.DurationMS = now.Sub(*row.StartedAt).Milliseconds()
	}
	errs, err := ts.JobFinishManyTx(ctx, tx, []*store.JobFinishParams{fin})
	if err != nil {
		return fmt.Errorf("job complete tx: %w", err)
	}
	if len(errs) > 0 && errs[0] != nil {
		return fmt.Errorf("job complete tx: %w", errs[0])
	}
	executor.NoteTxCompletion(ctx, fin)
	return nil
}
