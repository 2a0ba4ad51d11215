package idemhttp

import (
	"context"
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

// Flush writes the pending counts; on error they are kept for the next try.
func (c *CacheCounters) Flush(ctx context.Context) error {
	c.mu.Lock()
	batch := c.pending
	c.pending = map[string]map[string]int64{}
	c.mu.Unlock()
	for tenant, deltas := range batch {
		if err := c.store.CounterAdd(ctx, &store.CounterAddParams{Tenant: tenant, Deltas: deltas}); err != nil {
			// Keep what is not written: this tenant's and the tenants not
			// reached yet (the written ones were deleted from batch).
			for t, d := range batch {
				c.restore(t, d)
			}
			return err
		}
		delete(batch, tenant)
	}
	return nil
}

// restore puts deltas back after a failed flush.
func (c *CacheCounters) restore(tenant string, deltas map[string]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.pending[tenant]
	if m == nil {
		m = map[string]int64{}
		c.pending[tenant] = m
	}
	for n, d := range deltas {
		m[n] += d
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

// Stop ends the flush loop and flushes what is left.
func (c *CacheCounters) Stop(ctx context.Context) error {
	if c.stop != nil {
		select {
		case <-c.stop:
		default:
			close(c.stop)
			<-c.done
		}
	}
	return c.Flush(ctx)
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
