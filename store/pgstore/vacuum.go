package pgstore

import (
	"context"
	"log/slog"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// DefaultVacuumEvery is how many claimed jobs of a Store trigger its own
// VACUUM of the jobs table (Config.VacuumEvery).
const DefaultVacuumEvery = 50_000

// vacuumer vacuums the jobs table after every `every` claimed jobs, one
// VACUUM at a time, in the background.
//
// Why the store does it and not only autovacuum: each claim leaves the
// claimed job's entry in the claim index (jobs_claim_tenant_idx since
// 0018; jobs_claim_idx before), in front of the tenant's jobs still
// available, until a vacuum removes it, so every claim reads every job
// claimed since the last vacuum (BenchmarkHistoryRounds: a claim of 100 read
// 6 index pages on an empty history, 689 after 100,000 jobs, and took 3 ms
// then 100 ms after 400,000). Autovacuum may be off, wakes at most once per
// autovacuum_naptime (1 minute by default), is throttled, and skips the
// indexes when under 2% of the heap pages have dead rows. Vacuuming by
// claimed jobs bounds the dead entries a claim reads, whatever the history.
type vacuumer struct {
	s        *Store
	every    int64
	claimed  atomic.Int64
	kick     chan struct{} // capacity 1: a pending request
	cancel   context.CancelFunc
	done     chan struct{}
	afterRun func(error) // test hook, called after each VACUUM
}

// startVacuumer starts the vacuumer of s (every > 0).
func (s *Store) startVacuumer(every int) {
	ctx, cancel := context.WithCancel(context.Background())
	v := &vacuumer{s: s, every: int64(every), kick: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	s.vac = v
	go v.loop(ctx)
}

// stopVacuumer cancels a running VACUUM and waits for the loop to end.
func (s *Store) stopVacuumer() {
	if s.vac == nil {
		return
	}
	s.vac.cancel()
	<-s.vac.done
}

// noteClaimed counts n claimed jobs and requests a VACUUM when due.
func (s *Store) noteClaimed(n int) {
	v := s.vac
	if v == nil || n == 0 {
		return
	}
	if v.claimed.Add(int64(n)) < v.every {
		return
	}
	select {
	case v.kick <- struct{}{}:
	default: // one is already pending
	}
}

// loop runs one VACUUM per request until ctx ends.
func (v *vacuumer) loop(ctx context.Context) {
	defer close(v.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-v.kick:
		}
		v.claimed.Store(0)
		err := v.runOnce(ctx)
		if err != nil && ctx.Err() == nil {
			v.s.logger.Warn("pgstore: vacuum jobs", slog.String("schema", v.s.schema), slog.Any("error", err))
		}
		if v.afterRun != nil {
			v.afterRun(err)
		}
	}
}

// runOnce vacuums the jobs table. SKIP_LOCKED: when another node's VACUUM
// (or autovacuum) holds the table, this one is skipped instead of queued.
// INDEX_CLEANUP ON: the dead entries of the claim index are what claims pay
// for, so the indexes are always vacuumed. VACUUM cannot run in a
// transaction, hence the simple protocol.
func (v *vacuumer) runOnce(ctx context.Context) error {
	_, err := v.s.pool.Exec(ctx, v.s.sql(`VACUUM (SKIP_LOCKED, INDEX_CLEANUP ON) {schema}.jobs`),
		pgx.QueryExecModeSimpleProtocol)
	return err
}
