package idemhttp

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store"
)

// DefaultCounterFlush is how often CacheCounters writes its counts.
const DefaultCounterFlush = time.Second

// CacheCounters is an idem.Observer that adds cache hits and misses to the
// store's counters (store.Counters), so every node and every restart see
// the same hit rate in /v1/stats and /v1/health. It counts in memory and
// flushes every interval and at Stop.
type CacheCounters struct {
	store    store.Counters
	interval time.Duration
	logger   *slog.Logger

	mu      sync.Mutex
	pending map[string]map[string]int64 // tenant → name → delta

	stop chan struct{}
	done chan struct{}
}

// NewCacheCounters returns counters flushing to st every interval
// (DefaultCounterFlush when <= 0).
func NewCacheCounters(st store.Counters, interval time.Duration, logger *slog.Logger) *CacheCounters {
	if interval <= 0 {
		interval = DefaultCounterFlush
	}
	if logger == nil {
		logger = slog.Default()
	}
	return &CacheCounters{store: st, interval: interval, logger: logger, pending: map[string]map[string]int64{}}
}

// ObserveJob implements idem.Observer.
func (c *CacheCounters) ObserveJob(e *idem.JobEvent) {
	var name string
	switch e.Type {
	case idem.EventCacheHit:
		name = store.CounterCacheHits
	case idem.EventCacheMiss:
		name = store.CounterCacheMisses
	default:
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.pending[e.Tenant]
	if m == nil {
		m = map[string]int64{}
		c.pending[e.Tenant] = m
	}
	m[name]++
}

// Flush writes the pending counts, one store call per tenant. It writes
// each count at most once: a call that fails may have committed (a
// PostgreSQL commit whose answer was lost, a write the caller's context
// gave up on while the store went on), so its counts are dropped and
// logged rather than written again, which could count the same hits twice.
// The tenants not tried yet (after a failure, or once ctx is done) keep
// their counts for the next flush. The hit rate is therefore low, never
// high, by the counts of a failed write.
func (c *CacheCounters) Flush(ctx context.Context) error {
	c.mu.Lock()
	batch := c.pending
	c.pending = map[string]map[string]int64{}
	c.mu.Unlock()
	for tenant, deltas := range batch {
		if err := ctx.Err(); err != nil {
			c.restore(batch) // not tried: surely not written
			return fmt.Errorf("flush cache counters: %w", err)
		}
		delete(batch, tenant)
		if err := c.store.CounterAdd(ctx, &store.CounterAddParams{Tenant: tenant, Deltas: deltas}); err != nil {
			c.logger.Warn("cache counts dropped: their write failed and may have applied, so they are not written again",
				"tenant", tenant, "hits", deltas[store.CounterCacheHits], "misses", deltas[store.CounterCacheMisses], "err", err)
			c.restore(batch) // the tenants not tried yet
			return err
		}
	}
	return nil
}

// restore puts back the deltas of a flush that did not try them.
func (c *CacheCounters) restore(batch map[string]map[string]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for tenant, deltas := range batch {
		m := c.pending[tenant]
		if m == nil {
			m = map[string]int64{}
			c.pending[tenant] = m
		}
		for n, d := range deltas {
			m[n] += d
		}
	}
}

// Start flushes every interval until Stop.
func (c *CacheCounters) Start(ctx context.Context) {
	c.stop, c.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(c.done)
		t := time.NewTicker(c.interval)
		defer t.Stop()
		for {
			select {
			case <-c.stop:
				return
			case <-t.C:
				if err := c.Flush(ctx); err != nil {
					c.logger.Warn("flush cache counters", "err", err)
				}
			}
		}
	}()
}

// StopFlushTimeout bounds the last flush of Stop when the context Stop was
// given has less time left (a shutdown that used its grace stopping the
// client): the last second's counts are written rather than lost with the
// process.
const StopFlushTimeout = 2 * time.Second

// Stop ends the flush loop and flushes what is left, on ctx, or on a
// context of its own of StopFlushTimeout when ctx is done or ends sooner.
// Counts it could not write are logged and lost.
func (c *CacheCounters) Stop(ctx context.Context) error {
	if c.stop != nil {
		select {
		case <-c.stop:
		default:
			close(c.stop)
			<-c.done
		}
	}
	fctx := ctx
	if dl, ok := ctx.Deadline(); ctx.Err() != nil || ok && time.Until(dl) < StopFlushTimeout {
		var cancel context.CancelFunc
		fctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), StopFlushTimeout)
		defer cancel()
	}
	err := c.Flush(fctx)
	if err != nil {
		c.mu.Lock()
		var hits, misses int64
		for _, m := range c.pending {
			hits, misses = hits+m[store.CounterCacheHits], misses+m[store.CounterCacheMisses]
		}
		c.mu.Unlock()
		if hits+misses > 0 {
			c.logger.Warn("cache counts not written at stop", "hits", hits, "misses", misses, "err", err)
		}
	}
	return err
}

// persistedCache replaces the per-process hit and miss counts of cs by
// the store's, when the store keeps counters.
func (s *Server) persistedCache(ctx context.Context, tenant string, cs *idem.CacheStats) error {
	sc, ok := s.store.(store.Counters)
	if !ok {
		return nil
	}
	m, err := sc.CounterGet(ctx, &store.CounterGetParams{Tenant: tenant})
	if err != nil {
		return err
	}
	cs.Hits, cs.Misses, cs.HitRate = m[store.CounterCacheHits], m[store.CounterCacheMisses], 0
	if cs.Hits+cs.Misses > 0 {
		cs.HitRate = float64(cs.Hits) / float64(cs.Misses+cs.Hits)
	}
	return nil
}
