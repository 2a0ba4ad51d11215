package idem

import (
	"context"
	"fmt"
	"github.com/idem-dev/idem/store"
	"time"
)

// JobWaitMaxPoll caps the interval at which JobWait re-reads a job that no
// local event announced (a job finished by another process).
const JobWaitMaxPoll = time.Second

// JobWait returns job id (of any tenant) once it is finished: completed,
// dead or cancelled. It returns ErrNotFound for an unknown job and the
// context's error (wrapped) when ctx ends first.
//
// A job finished by this client (its workers, a pull Complete or Fail, a
// cancel) wakes the waiter at once through the notifier. A job finished by
// another process is seen by polling: the job is re-read after
// Config.PollInterval (at most JobWaitMaxPoll), the interval doubling up
// to JobWaitMaxPoll.
func (c *Client) JobWait(ctx context.Context, id int64) (*JobRow, error) {
	poll := min(c.cfg.PollInterval, JobWaitMaxPoll)
	for {
		// Register before reading, so a finish between the read and the
		// wait is not missed.
		finished, stop := c.notifier.WaitFinished(id)
		row, err := c.store.JobGet(ctx, &store.JobGetParams{ID: id})
		if err != nil {
			stop()
			return nil, fmt.Errorf("wait job %d: %w", id, err)
		}
		if row.State.Finished() {
			stop()
			return row, nil
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
		case <-finished:
		case <-t.C:
			poll = min(2*poll, JobWaitMaxPoll)
		}
		t.Stop()
		stop()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("wait job %d: %w", id, ctx.Err())
		}
	}
}

// finished tells JobWait waiters that these jobs were finished here.
func (c *Client) finished(ids ...int64) { c.notifier.Finished(ids) }
