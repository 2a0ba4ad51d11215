package idem

import (
	"context"
	"errors"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// dropVoided returns jobs without those whose claim no longer stands once
// the claim's key step took their keys (keyed jobs whose key the claim
// itself did not hold): a job cancelled between its claim and that step
// would otherwise be handed out cancelled, and the lease its key step took
// after the cancel (which had settled the key's record) would be held by
// nobody until it ended — the key's next job snoozing meanwhile. A cancel
// after the key step released the key itself, and is found by the
// worker's heartbeat. The claim's leases are checked with a renewal to
// their end (until); one refused is not handed out, is given back if it
// still runs under the claim's token (its lease over), and its key lease is
// given back when its job was cancelled (final: no other run holds it).
// One renewed is handed out with the lease end the store reports it
// stored. When the check fails the jobs are handed out as they are.
func (c *Client) dropVoided(ctx context.Context, jobs []*JobRow, until time.Time) []*JobRow {
	var leases []store.Lease
	rows := map[int64]*JobRow{}
	for _, j := range jobs {
		if j.IdempotencyKey != "" && !j.KeyHeld {
			leases = append(leases, store.Lease{ID: j.ID, Token: j.LeaseToken})
			rows[j.ID] = j
		}
	}
	if len(leases) == 0 {
		return jobs
	}
	until = until.Truncate(time.Microsecond) // as the stores keep it
	ends := make([]time.Time, len(leases))   // the ends stored, when the store's clock moved them
	errs, err := c.store.JobHeartbeatMany(ctx, &store.JobHeartbeatParams{Leases: leases, Until: until, Now: c.now(), Ends: ends})
	if err != nil {
		c.logger.Warn("checking the claimed jobs after their key step failed; handing them out", "jobs", len(leases), "err", err)
		return jobs
	}
	var voided []store.Lease
	for i, e := range errs {
		switch {
		case errors.Is(e, ErrLeaseLost):
			voided = append(voided, leases[i])
		case e == nil:
			// Renewed: the job is handed out with the end now stored (on
			// PostgreSQL's own clock, its now plus the lease's length
			// left, not the claim's end).
			end := storedEnd(until, ends[i])
			rows[leases[i].ID].LeaseExpiresAt = &end
		}
	}
	if len(voided) == 0 {
		return jobs
	}
	if _, err := c.store.JobReleaseMany(ctx, &store.JobReleaseManyParams{Leases: voided, Now: c.now()}); err != nil {
		c.logger.Warn("could not give back claimed jobs whose lease ended; they wait for the rescuer", "jobs", len(voided), "err", err)
	}
	drop := make(map[int64]bool, len(voided))
	dropped := make([]*JobRow, 0, len(voided))
	for _, l := range voided {
		drop[l.ID] = true
		dropped = append(dropped, rows[l.ID])
	}
	c.ackCancels(ctx, dropped)
	out := jobs[:0:0]
	for _, j := range jobs {
		if !drop[j.ID] {
			out = append(out, j)
		}
	}
	return out
}

// ackCancels acknowledges the cancels of those of jobs, claimed by a claim
// that hands them to nobody, that were cancelled since: no handler will
// run them. A cancelled job's hold (its slot, its partition, its
// dependants waiting for any outcome) waits for that acknowledgement, the
// refused finish of its lease (store.Jobs.JobCancel), or else for its
// lease to end; the key lease a keyed one's claim took is given back too
// (final: no other run holds it). Jobs not cancelled are left as they are.
func (c *Client) ackCancels(ctx context.Context, jobs []*JobRow) {
	for _, j := range jobs {
		row, err := c.store.JobGet(ctx, &store.JobGetParams{ID: j.ID})
		if err != nil || row.State != StateCancelled {
			continue
		}
		ack := &store.JobFinishParams{ID: j.ID, LeaseToken: j.LeaseToken, State: StateCancelled,
			Outcome: idemtype.OutcomeCancelled, FinishedAt: c.now()}
		if _, err := c.store.JobFinishMany(ctx, []*store.JobFinishParams{ack}); err != nil {
			c.logger.Warn("acknowledging the cancel of a job cancelled during its claim failed; its hold waits for its lease to end",
				"job", j.ID, "err", err)
		}
		if j.IdempotencyKey == "" {
			continue
		}
		if err := c.store.RecordRelease(ctx, &store.RecordReleaseParams{Tenant: j.Tenant, Key: j.IdempotencyKey,
			Owner: store.JobOwner(j.ID), JobLease: &store.Lease{ID: j.ID, Token: j.LeaseToken}}); err != nil {
			c.logger.Warn("giving back the key of a job cancelled during its claim failed; the key waits for its lease to end",
				"job", j.ID, "err", err)
		}
	}
}
