package sqlitestore

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem/store"
)

// waitFilterReady waits until the store's key filter finished a build.
func waitFilterReady(t *testing.T, s *Store) {
	t.Helper()
	waitReady(t, s.keys)
}

// TestKeyFilterNeverSaysNoToARecordedKey: every key recorded before the
// store opened (scanned) or inserted after (added), including keys added
// while a rebuild scans the table and past the planned capacity, is a
// "maybe"; most never-seen keys are a "no".
func TestKeyFilterNeverSaysNoToARecordedKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := dir + "/idem.db"
	ctx := context.Background()
	s, err := Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var before []*store.JobInsertParams
	for i := range 500 {
		before = append(before, keyedJob("k", fmt.Sprintf("before-%d", i), "fp"))
	}
	insert(t, s, t0, before...)
	s.Close()

	s = openAt(t, path)
	if s.keys == nil {
		t.Fatal("a store holding the process lock keeps no key filter")
	}
	waitFilterReady(t, s)
	for i := range 500 {
		if !s.keys.mayContain("default", fmt.Sprintf("before-%d", i)) {
			t.Fatalf("scanned key before-%d: filter says never seen", i)
		}
	}
	falseMaybe := 0
	for i := range 10000 {
		if s.keys.mayContain("default", fmt.Sprintf("never-%d", i)) {
			falseMaybe++
		}
	}
	if falseMaybe > 500 { // 10 bits and 7 probes a key: about 1 %
		t.Fatalf("%d of 10000 unseen keys answered maybe", falseMaybe)
	}
}

// TestKeyFilterRebuildKeepsEveryKey: a filter planned for 100 keys takes
// 5,000, committed to a table its scans read and added after each commit
// (as the store does), from 4 goroutines while it rebuilds itself: no
// committed key is ever a "no", before, during or after the rebuilds.
func TestKeyFilterRebuildKeepsEveryKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var mu sync.Mutex
	var table []string
	scan := func(ctx context.Context, each func(tenant, key string)) error {
		mu.Lock()
		keys := slices.Clone(table)
		mu.Unlock()
		for _, k := range keys {
			each("t", k)
		}
		return nil
	}
	f := newKeyFilter(ctx, scan, 100, slog.New(slog.DiscardHandler))
	var wg sync.WaitGroup
	var bad atomic.Int64
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1250 {
				k := fmt.Sprintf("k-%d-%d", g, i)
				mu.Lock()
				table = append(table, k) // committed
				mu.Unlock()
				f.add("t", k)
				if !f.mayContain("t", k) {
					bad.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if bad.Load() > 0 {
		t.Fatalf("%d keys read as never seen right after their add", bad.Load())
	}
	waitReady(t, f)
	for _, k := range table {
		if !f.mayContain("t", k) {
			t.Fatalf("committed key %s: filter says never seen", k)
		}
	}
	if f.cap < 5000 {
		t.Fatalf("capacity %d after 5000 keys: no rebuild", f.cap)
	}
}

// TestKeyFilterKeepsKeysAddedDuringAScan: a key committed after a
// rebuild's scan took its snapshot, and added while the scan runs, is kept
// (the scan is held until the adds are done, so the order is certain).
func TestKeyFilterKeepsKeysAddedDuringAScan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var mu sync.Mutex
	var table []string
	scans := 0
	started, release := make(chan struct{}), make(chan struct{})
	scan := func(ctx context.Context, each func(tenant, key string)) error {
		mu.Lock()
		keys := slices.Clone(table)
		scans++
		second := scans == 2
		mu.Unlock()
		if second { // the rebuild: snapshot taken, held until released
			close(started)
			<-release
		}
		for _, k := range keys {
			each("t", k)
		}
		return nil
	}
	commitAndAdd := func(f *keyFilter, k string) {
		mu.Lock()
		table = append(table, k)
		mu.Unlock()
		f.add("t", k)
	}
	f := newKeyFilter(ctx, scan, 10, slog.New(slog.DiscardHandler))
	waitReady(t, f)
	for i := range 11 { // the 11th passes the capacity: a rebuild starts
		commitAndAdd(f, fmt.Sprintf("k%d", i))
	}
	<-started
	for i := 11; i < 16; i++ {
		commitAndAdd(f, fmt.Sprintf("k%d", i))
	}
	close(release)
	waitReady(t, f)
	for i := range 16 {
		if !f.mayContain("t", fmt.Sprintf("k%d", i)) {
			t.Fatalf("k%d: filter says never seen after the rebuild", i)
		}
	}
}

// waitReady waits until f finished a build (a finished build may start a
// larger one: then that one is waited for too).
func waitReady(t *testing.T, f *keyFilter) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := f.wait(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestKeyFilterSkipsOnlyTheRead: a duplicate the filter does not know (a key
// recorded behind its back) is still answered as the existing job, by the
// write path.
func TestKeyFilterSkipsOnlyTheRead(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	waitFilterReady(t, s)
	first := insert(t, s, t0, keyedJob("k", "hidden", "fp"))[0]
	// Forget the key, as a filter built before it was recorded would.
	s.keys.mu.Lock()
	clear(s.keys.bits)
	s.keys.mu.Unlock()
	if s.keys.mayContain("default", "hidden") {
		t.Fatal("the cleared filter still knows the key")
	}
	again := insert(t, s, t0.Add(time.Second), keyedJob("k", "hidden", "fp"))[0]
	if !again.Existing || again.Job.ID != first.Job.ID {
		t.Fatalf("duplicate behind the filter's back: %+v, want the existing job %d", again, first.Job.ID)
	}
	other := insert(t, s, t0.Add(time.Second), keyedJob("k", "hidden", "other-fp"))[0]
	if other.Err == nil {
		t.Fatal("another fingerprint under the key was accepted")
	}
}

// openAt opens the store at path, closed at cleanup.
func openAt(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestKeyFilterCloseWaitsForTheScan: close cancels a running scan and
// returns only after it ended, so a Store never reads its database after
// Close (a scan that outlived Close left files in a removed directory).
func TestKeyFilterCloseWaitsForTheScan(t *testing.T) {
	t.Parallel()
	scanning, ended := make(chan struct{}), make(chan struct{})
	scan := func(ctx context.Context, each func(tenant, key string)) error {
		close(scanning)
		<-ctx.Done() // a long scan: it ends only when cancelled
		close(ended)
		return ctx.Err()
	}
	f := newKeyFilter(context.Background(), scan, 10, slog.New(slog.DiscardHandler))
	<-scanning
	f.close()
	select {
	case <-ended:
	default:
		t.Fatal("close returned while the scan was still running")
	}
	f.add("t", "k") // after close: no new build starts
	if !f.mayContain("t", "never") {
		t.Fatal("a filter that never finished a build answered no")
	}
}

// TestWaitKeyFilter: a Store reopened on a file with records builds its
// filter in the background; WaitKeyFilter returns once the filter is ready
// (it then knows the recorded keys), at once on a Store without a filter
// build pending, and with an error when the build is stopped by Close.
func TestWaitKeyFilter(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "idem.db")
	ctx := context.Background()
	s, err := Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ps []*store.JobInsertParams
	for i := range 2000 {
		ps = append(ps, keyedJob("k", fmt.Sprintf("key-%d", i), "fp"))
	}
	if _, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: ps, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.WaitKeyFilter(ctx); err != nil {
		t.Fatal(err)
	}
	s.keys.mu.Lock()
	ready := s.keys.ready
	s.keys.mu.Unlock()
	if knows := s.keys.mayContain("default", "key-1999"); !ready || !knows {
		t.Fatalf("after WaitKeyFilter: ready %v, knows a recorded key %v", ready, knows)
	}
	if err := s.WaitKeyFilter(ctx); err != nil {
		t.Fatalf("second wait: %v", err)
	}

	scan := func(ctx context.Context, each func(tenant, key string)) error { <-ctx.Done(); return ctx.Err() }
	f := newKeyFilter(context.Background(), scan, 10, slog.New(slog.DiscardHandler))
	done := make(chan error, 1)
	go func() { done <- f.wait(context.Background()) }()
	f.close()
	if err := <-done; err == nil {
		t.Fatal("wait on a build stopped by close returned nil")
	}
}
