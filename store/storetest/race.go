package storetest

import (
	"encoding/json"
)
import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

func raceCases() []testCase {
	return []testCase{
		{"Race/one_key_64_concurrent_inserts", testRaceOneKey},
		{"Race/50_keys_16_concurrent_inserters", testRaceManyKeys},
		{"Race/key_orders_differ_per_goroutine_two_tenants", testRaceKeyOrders},
		{"Race/claims_8_workers_2000_jobs", testRaceClaims},
		{"Race/claims_and_promoter_over_due_jobs", testRaceClaimsOfDueJobs},
		{"Race/partitions_never_run_twice", testRacePartitions},
		{"JobClaim/concurrent_claimers_take_each_job_once", testConcurrentClaims},
		{"JobClaim/concurrent_fifo_keeps_order", testConcurrentFIFO},
		{"Race/cached_results_against_acquires_reopens_sweeps_and_deletes", testRaceCachedResults},
		{"Race/key_of_a_deleted_job_reopened_once", testRaceKeyOfDeletedJob},
	}
}

// keyAnswers collects, from racing inserts of keyed jobs, the jobs each
// key was answered with and how many inserts created one.
type keyAnswers struct {
	mu      sync.Mutex
	jobs    map[string]map[int64]bool
	created int
}

// add records the answers res to the items ps, or returns the first
// item's error.
func (a *keyAnswers) add(ps []*store.JobInsertParams, res []store.JobInsertResult) error {
	if len(res) != len(ps) {
		return fmt.Errorf("%d results for %d items", len(res), len(ps))
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.jobs == nil {
		a.jobs = map[string]map[int64]bool{}
	}
	for i, r := range res {
		if r.Err != nil {
			return fmt.Errorf("item %d: %w", i, r.Err)
		}
		k := ps[i].IdempotencyKey
		if a.jobs[k] == nil {
			a.jobs[k] = map[int64]bool{}
		}
		a.jobs[k][r.Job.ID] = true
		if !r.Existing {
			a.created++
		}
	}
	return nil
}

// partitionLog is what the claimers of a partition race record, under mu:
// the job each partition runs, the order its jobs ran in, violations of
// the one-running-job rule, and the finishes.
type partitionLog struct {
	mu      sync.Mutex
	running map[string]int64
	order   map[string][]int64
	bad     []string
	done    int
}

func newPartitionLog() *partitionLog {
	return &partitionLog{running: map[string]int64{}, order: map[string][]int64{}}
}

// claimed records jobs a claim returned, and a violation for each job
// whose partition already runs another.
func (l *partitionLog) claimed(jobs []*idemtype.JobRow) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, j := range jobs {
		if other, ok := l.running[j.PartitionKey]; ok {
			l.bad = append(l.bad, fmt.Sprintf("partition %s: job %d claimed while %d runs", j.PartitionKey, j.ID, other))
		}
		l.running[j.PartitionKey] = j.ID
		l.order[j.PartitionKey] = append(l.order[j.PartitionKey], j.ID)
	}
}

// finished is how many jobs were finished.
func (l *partitionLog) finished() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done
}

// finish completes j: j leaves running before its finish commits, so that
// a claim that takes the partition's next job meanwhile is not counted as
// a second running job.
func (l *partitionLog) finish(t *testing.T, s store.Store, j *idemtype.JobRow, now time.Time) error {
	l.mu.Lock()
	delete(l.running, j.PartitionKey)
	l.mu.Unlock()
	errs, err := s.JobFinishMany(t.Context(), []*store.JobFinishParams{completion(j, `1`, now)})
	if err != nil {
		return err
	}
	if errs[0] != nil {
		return fmt.Errorf("finish %d: %w", j.ID, errs[0])
	}
	l.mu.Lock()
	l.done++
	l.mu.Unlock()
	return nil
}

// parallel runs fn(i) for i in [0, n) on n goroutines released together and
// returns the first error.
func parallel(n int, fn func(i int) error) error {
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		errs  = make([]error, n)
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = fn(i)
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("goroutine %d: %w", i, err)
		}
	}
	return nil
}

// testRaceOneKey: 64 inserts of one key create one job, and every insert
// returns it. Overlap: the 64 goroutines wait on parallel's start barrier
// and are released together, each with its single insert.
func testRaceOneKey(t *testing.T, s store.Store) {
	const n = 64
	results := make([]store.JobInsertResult, n)
	err := parallel(n, func(i int) error {
		res, err := s.JobInsertMany(t.Context(), &store.JobInsertManyParams{
			Jobs: []*store.JobInsertParams{keyed("k", "the-key", "fp")}, Now: at(0)})
		if err != nil {
			return err
		}
		if len(res) != 1 {
			return fmt.Errorf("%d results", len(res))
		}
		results[i] = res[0]
		return res[0].Err
	})
	if err != nil {
		t.Fatal(err)
	}
	created, id := 0, int64(0)
	for _, r := range results {
		if !r.Existing {
			created++
			id = r.Job.ID
		}
	}
	if created != 1 {
		t.Fatalf("%d inserts created a job, want exactly 1", created)
	}
	for i, r := range results {
		if r.Job == nil || r.Job.ID != id {
			t.Errorf("insert %d: job %v, want %d", i, r.Job, id)
		}
	}
	if jobs := listAll(t, s, store.JobFilter{}); len(jobs) != 1 {
		t.Errorf("%d jobs stored, want 1", len(jobs))
	}
	if r := record(t, s, "default", "the-key", at(0)); r.JobID != id {
		t.Errorf("record points to job %d, want %d", r.JobID, id)
	}
}

// testRaceManyKeys: 16 inserters × 200 items over 50 keys create one job
// per key. Overlap: parallel's start barrier releases the 16 inserters
// together, and each sends 10 batches back to back. (Every goroutine sends
// its keys in the same order here; differing orders are
// testRaceKeyOrders' job, race_orders.go.)
func testRaceManyKeys(t *testing.T, s store.Store) {
	const (
		workers = 16
		perG    = 200
		batch   = 20
		keys    = 50
	)
	var answers keyAnswers
	err := parallel(workers, func(g int) error {
		for b := 0; b < perG; b += batch {
			var ps []*store.JobInsertParams
			for i := b; i < b+batch; i++ {
				ps = append(ps, keyed("k", fmt.Sprintf("key-%02d", (g*perG+i*7)%keys), "fp"))
			}
			res, err := s.JobInsertMany(t.Context(), &store.JobInsertManyParams{Jobs: ps, Now: at(0)})
			if err != nil {
				return err
			}
			if err := answers.add(ps, res); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	created, byKey := answers.created, answers.jobs
	if created != keys {
		t.Errorf("%d jobs created, want %d", created, keys)
	}
	if len(byKey) != keys {
		t.Errorf("%d keys seen, want %d", len(byKey), keys)
	}
	for k, set := range byKey {
		if len(set) != 1 {
			t.Errorf("key %s returned %d different jobs", k, len(set))
		}
	}
	if jobs := listAll(t, s, store.JobFilter{}); len(jobs) != keys {
		t.Errorf("%d jobs stored, want %d", len(jobs), keys)
	}
}

// testRaceClaims: 8 claimers take 2000 jobs, each exactly once. Overlap:
// parallel's start barrier releases the 8 claimers together, and each
// claims 10 at a time until the queue is empty (about 25 claims each).
func testRaceClaims(t *testing.T, s store.Store) {
	const total = 2000
	for b := 0; b < total; b += 500 {
		ps := make([]*store.JobInsertParams, 500)
		for i := range ps {
			ps[i] = newJob("k")
		}
		insertNew(t, s, at(0), ps...)
	}
	var mu sync.Mutex
	seen := map[int64]int{}
	err := parallel(8, func(g int) error {
		for {
			jobs, err := s.JobClaim(t.Context(), &store.JobClaimParams{Queues: []string{"default"},
				WorkerID: fmt.Sprint("w", g), Limit: 10, LeaseUntil: at(time.Hour), Now: at(time.Second)})
			if err != nil {
				return err
			}
			if len(jobs) == 0 {
				return nil
			}
			if len(jobs) > 10 {
				return fmt.Errorf("claim returned %d jobs, limit 10", len(jobs))
			}
			mu.Lock()
			for _, j := range jobs {
				seen[j.ID]++
			}
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != total {
		t.Errorf("%d distinct jobs claimed, want %d", len(seen), total)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("job %d claimed %d times", id, n)
		}
	}
	stats, err := s.QueueStats(t.Context(), &store.QueueStatsParams{Tenant: "", Now: at(time.Second)})
	if err != nil {
		t.Fatalf("QueueStats: %v", err)
	}
	if n := count(stats, "default", idemtype.StateRunning); n != total {
		t.Errorf("%d jobs running, want %d", n, total)
	}
	if n := count(stats, "default", idemtype.StateAvailable); n != 0 {
		t.Errorf("%d jobs still available, want 0", n)
	}
}

// testRacePartitions: 4 workers claim and finish 8 partitions of 8 jobs;
// no partition ever has two jobs running. Overlap: parallel's start
// barrier releases the 4 workers together, and they claim and finish in
// a loop until every job is done.
func testRacePartitions(t *testing.T, s store.Store) {
	const parts, perPart = 8, 8
	var ps []*store.JobInsertParams
	for i := range perPart {
		for p := range parts {
			j := newJob("k")
			j.PartitionKey = fmt.Sprint("p", p)
			j.Priority = i % 3 // later jobs of a partition may outrank its head
			ps = append(ps, j)
		}
	}
	insertNew(t, s, at(0), ps...)

	rec := newPartitionLog()
	deadline := time.Now().Add(60 * time.Second)
	err := parallel(4, func(g int) error {
		for {
			n := rec.finished()
			if n == parts*perPart {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("partitions did not drain (%d of %d jobs done)", n, parts*perPart)
			}
			jobs, err := s.JobClaim(t.Context(), &store.JobClaimParams{Queues: []string{"default"},
				WorkerID: fmt.Sprint("w", g), Limit: 3, LeaseUntil: at(time.Hour), Now: at(time.Second)})
			if err != nil {
				return err
			}
			rec.claimed(jobs)
			for _, j := range jobs {
				if err := rec.finish(t, s, j, at(2*time.Second)); err != nil {
					return err
				}
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range rec.bad {
		t.Error(b)
	}
	for p, o := range rec.order {
		if len(o) != perPart {
			t.Errorf("partition %s ran %d jobs, want %d", p, len(o), perPart)
		}
		for i := 1; i < len(o); i++ {
			if o[i] <= o[i-1] {
				t.Errorf("partition %s ran out of order: %v", p, o)
				break
			}
		}
	}
}

// testConcurrentClaims: 8 claimers of one worker id take 2000 jobs, 37 at
// a time, each exactly once and as a proper running row. Overlap: the 8
// goroutines wait on a start channel closed once all are started, then
// claim back to back until the queue is empty.
func testConcurrentClaims(t *testing.T, s store.Store) {
	const total = 2000
	ps := make([]*store.JobInsertParams, total)
	for i := range ps {
		ps[i] = newJob("c")
	}
	for _, r := range insertAll(t, s, base, ps...) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	var mu sync.Mutex
	seen := map[int64]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for {
				jobs, err := s.JobClaim(t.Context(), &store.JobClaimParams{Queues: []string{"default"},
					WorkerID: "w", Limit: 37, LeaseUntil: base.Add(time.Minute), Now: base})
				if err != nil {
					t.Errorf("claim: %v", err)
					return
				}
				if len(jobs) == 0 {
					return
				}
				mu.Lock()
				for _, j := range jobs {
					seen[j.ID]++
					if j.State != idemtype.StateRunning || j.Attempt != 1 || j.LeaseToken == "" {
						t.Errorf("bad claimed row %+v", j)
					}
				}
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(seen) != total {
		t.Fatalf("claimed %d distinct jobs, want %d", len(seen), total)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("job %d claimed %d times", id, n)
		}
	}
}

// FIFO partitions keep their order and never run two jobs at once under
// concurrent claimers and inserters. Overlap: the 20 inserters (one job per
// transaction) and the 6 claimers start together, and the claimers claim
// in a loop until every job is finished, so claims run while partitions
// are still growing.
func testConcurrentFIFO(t *testing.T, s store.Store) {
	const parts, per = 10, 40
	var wg sync.WaitGroup
	// Two inserters per partition, one job per transaction.
	for p := range 2 * parts {
		wg.Go(func() {
			p := p % parts
			for i := range per / 2 {
				jp := newJob("k")
				jp.PartitionKey = fmt.Sprintf("p%d", p)
				jp.Args = json.RawMessage(fmt.Sprintf(`{"seq":%d}`, i))
				if _, err := s.JobInsertMany(t.Context(), &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{jp}, Now: base}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	var mu sync.Mutex
	running := map[string]bool{}   // claimed, finish not called yet
	finishing := map[string]bool{} // finish called, not returned (may have committed)
	order := map[string][]int64{}
	done := 0
	for range 6 {
		wg.Go(func() {
			deadline := time.Now().Add(60 * time.Second)
			for time.Now().Before(deadline) {
				mu.Lock()
				finished := done == parts*per
				mu.Unlock()
				if finished {
					return
				}
				jobs, err := s.JobClaim(t.Context(), &store.JobClaimParams{Queues: []string{"default"}, WorkerID: "w", Limit: 4, LeaseUntil: at(time.Minute), Now: base})
				if err != nil {
					t.Error(err)
					return
				}
				var fin []*store.JobFinishParams
				mu.Lock()
				for _, j := range jobs {
					if running[j.PartitionKey] && !finishing[j.PartitionKey] {
						t.Errorf("partition %s: job %d claimed while its head runs", j.PartitionKey, j.ID)
					}
					running[j.PartitionKey] = true
					order[j.PartitionKey] = append(order[j.PartitionKey], j.ID)
				}
				mu.Unlock()
				for _, j := range jobs {
					fin = append(fin, completion(j, `{}`, base))
				}
				if len(fin) > 0 {
					mu.Lock()
					for _, j := range jobs {
						finishing[j.PartitionKey] = true
					}
					mu.Unlock()
					if _, err := s.JobFinishMany(t.Context(), fin); err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					for _, j := range jobs {
						if order[j.PartitionKey][len(order[j.PartitionKey])-1] == j.ID {
							running[j.PartitionKey], finishing[j.PartitionKey] = false, false
						}
					}
					done += len(fin)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	for p, ids := range order {
		for i := 1; i < len(ids); i++ {
			if ids[i] <= ids[i-1] {
				t.Fatalf("partition %s ran out of id order: %v", p, ids)
			}
		}
		if len(ids) != per {
			t.Fatalf("partition %s ran %d jobs, want %d", p, len(ids), per)
		}
	}
	if done != parts*per {
		t.Fatalf("completed %d jobs, want %d", done, parts*per)
	}
}
