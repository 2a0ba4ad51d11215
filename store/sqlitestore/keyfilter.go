package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"sync"
)

// keyFilter is a Bloom filter of the (tenant, key) pairs of the idempotency
// records, kept by the Store that holds the database file's process lock
// (the only one that writes it). It lets a single keyed insert skip the read
// that looks for an existing record (Store.existing) when the key was
// certainly never recorded: for new keys that read found nothing and cost
// about a sixth of the CPU of an enqueue over HTTP.
//
// Only a "no" is trusted, and a wrong "no" is harmless: the write path
// decides duplicates by the records' unique key, so a missed key only costs
// the writer a little work. Keys are therefore added wherever it is cheap
// (keyed job inserts), deleted keys stay in (a "maybe", so a read), and
// while the filter is being built or rebuilt it answers "maybe".
type keyFilter struct {
	mu      sync.Mutex
	seed    maphash.Seed
	bits    []uint64
	n, cap  int
	ready   bool
	pending [][2]string // keys added while a build scans the table
	// built is closed when the latest build ends, ready or not (wait
	// blocks on it instead of polling).
	built chan struct{}
	build func(ctx context.Context, each func(tenant, key string)) error
	log   *slog.Logger
	// ctx ends at close, which waits for a running build (wg): a scan must
	// not touch the database after the Store closed it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Bloom parameters: 10 bits and 7 probes per key (about 1 % false "maybe"),
// room for at least minKeyFilterCap keys, twice the keys at each build.
const (
	keyFilterBitsPerKey = 10
	keyFilterProbes     = 7
	minKeyFilterCap     = 1 << 16
)

// newKeyFilter returns a filter with room for at least minCap keys that
// starts answering "maybe" and fills itself from scan in the background.
// scan must see every key committed before it starts; add is called after
// a key's commit, so a key is either seen by a scan or added after it began.
func newKeyFilter(ctx context.Context, scan func(ctx context.Context, each func(tenant, key string)) error, minCap int, log *slog.Logger) *keyFilter {
	f := &keyFilter{seed: maphash.MakeSeed(), build: scan, log: log}
	f.ctx, f.cancel = context.WithCancel(context.WithoutCancel(ctx))
	f.mu.Lock()
	f.startBuild(minCap)
	f.mu.Unlock()
	return f
}

// close stops a running build and waits for it.
func (f *keyFilter) close() {
	if f == nil {
		return
	}
	f.mu.Lock()
	f.cancel()
	f.mu.Unlock()
	f.wg.Wait()
}

// startBuild scans the records into a fresh filter of room capacity; f.mu
// is held by the caller. After close it does nothing (the filter stays
// "maybe").
func (f *keyFilter) startBuild(capacity int) {
	f.ready, f.pending = false, f.pending[:0]
	if f.ctx.Err() != nil {
		return
	}
	ctx, built := f.ctx, make(chan struct{})
	f.built = built
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		defer close(built)
		bits := make([]uint64, (capacity*keyFilterBitsPerKey+63)/64)
		n := 0
		err := f.build(ctx, func(tenant, key string) {
			f.set(bits, tenant, key)
			n++
		})
		f.mu.Lock()
		defer f.mu.Unlock()
		if err != nil {
			f.log.LogAttrs(ctx, slog.LevelDebug, "sqlitestore: key filter not built (a closed store?); keyed inserts read first", slog.Any("err", err))
			return
		}
		for _, k := range f.pending {
			f.set(bits, k[0], k[1])
			n++
		}
		f.bits, f.n, f.cap, f.ready, f.pending = bits, n, capacity, true, nil
		if f.n > f.cap {
			f.startBuild(2 * f.n)
		}
	}()
}

func (f *keyFilter) hashes(tenant, key string) (uint64, uint64) {
	var h maphash.Hash
	h.SetSeed(f.seed)
	h.WriteString(tenant)
	h.WriteByte(0)
	h.WriteString(key)
	h1 := h.Sum64()
	h2 := h1>>33 | h1<<31 | 1 // odd: the probes visit distinct bits
	return h1, h2
}

func (f *keyFilter) set(bits []uint64, tenant, key string) {
	h1, h2 := f.hashes(tenant, key)
	m := uint64(len(bits) * 64)
	for i := range uint64(keyFilterProbes) {
		b := (h1 + i*h2) % m
		bits[b/64] |= 1 << (b % 64)
	}
}

// add records a key (a keyed job was inserted, or may have been).
func (f *keyFilter) add(tenant, key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.ready {
		f.pending = append(f.pending, [2]string{tenant, key})
		return
	}
	f.set(f.bits, tenant, key)
	f.n++
	if f.n > f.cap { // fuller than planned: "maybe" grows likely; rebuild twice as large
		f.startBuild(2 * f.n)
	}
}

// mayContain reports false only when the key was certainly never added
// (nor recorded before the filter was built).
func (f *keyFilter) mayContain(tenant, key string) bool {
	if f == nil {
		return true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.ready {
		return true
	}
	h1, h2 := f.hashes(tenant, key)
	m := uint64(len(f.bits) * 64)
	for i := range uint64(keyFilterProbes) {
		b := (h1 + i*h2) % m
		if f.bits[b/64]&(1<<(b%64)) == 0 {
			return false
		}
	}
	return true
}

// WaitKeyFilter blocks until the filter of recorded keys that the Store
// builds in the background after Open is ready, or ctx ends. Until then
// every keyed insert reads the key's record first (and the build's scan of
// the records shares the CPU): right after opening a database with a
// million records that takes a few seconds. Tools that measure steady
// throughput wait for it; nothing else needs to. It returns nil at once
// when the Store keeps no filter (another process holds the file, or it
// was opened with SkipMigrate), and an error when a build ended without a
// filter (its scan failed, or the Store was closed).
func (s *Store) WaitKeyFilter(ctx context.Context) error {
	if s.keys == nil {
		return nil
	}
	return s.keys.wait(ctx)
}

// wait blocks until f finished a build (a finished build may start a
// larger one: then that one is waited for too) or ctx ends.
func (f *keyFilter) wait(ctx context.Context) error {
	for {
		f.mu.Lock()
		ready, built := f.ready, f.built
		f.mu.Unlock()
		if ready {
			return nil
		}
		if built == nil {
			return errors.New("key filter: no build started")
		}
		select {
		case <-built:
		case <-ctx.Done():
			return fmt.Errorf("key filter: %w", ctx.Err())
		}
		f.mu.Lock()
		ended := !f.ready && f.built == built
		f.mu.Unlock()
		if ended {
			return errors.New("key filter: the build ended without a filter (the scan failed, or the store was closed)")
		}
	}
}
