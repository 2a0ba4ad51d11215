package sqlitestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

var t0 = time.Date(2031, time.March, 4, 5, 6, 7, 123456000, time.UTC)

func openTest(t testing.TB, cfg *Config) *Store {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "idem.db"), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func job(kind string) *store.JobInsertParams {
	return &store.JobInsertParams{Tenant: "default", Queue: "default", Kind: kind,
		Args: json.RawMessage(`{}`), MaxAttempts: 3, RunAt: t0}
}

func keyedJob(kind, key, fp string) *store.JobInsertParams {
	p := job(kind)
	p.IdempotencyKey, p.Fingerprint = key, fp
	p.DedupWindow, p.ResultTTL = time.Hour, 24*time.Hour
	return p
}

func insert(t testing.TB, s *Store, now time.Time, ps ...*store.JobInsertParams) []store.JobInsertResult {
	t.Helper()
	res, err := s.JobInsertMany(context.Background(), &store.JobInsertManyParams{Jobs: ps, Now: now})
	if err != nil {
		t.Fatalf("JobInsertMany: %v", err)
	}
	return res
}

func claim(t testing.TB, s *Store, now time.Time, limit int) []*idemtype.JobRow {
	t.Helper()
	jobs, err := s.JobClaim(context.Background(), &store.JobClaimParams{Queues: []string{"default"},
		WorkerID: "w", Limit: limit, LeaseUntil: now.Add(time.Minute), Now: now})
	if err != nil {
		t.Fatalf("JobClaim: %v", err)
	}
	return jobs
}

func finish(t testing.TB, s *Store, j *idemtype.JobRow, state idemtype.JobState, now time.Time) {
	t.Helper()
	p := &store.JobFinishParams{ID: j.ID, LeaseToken: j.LeaseToken, State: state, FinishedAt: now,
		Outcome: idemtype.OutcomeCompleted, RunAt: now}
	if state == idemtype.StateCompleted {
		p.Result = json.RawMessage(`{"ok":true}`)
		p.RecordResult = []byte(`{"ok":true}`)
		p.ResultHash = "h"
	} else {
		p.Outcome, p.Error = idemtype.OutcomeDead, "boom"
	}
	errs, err := s.JobFinishMany(context.Background(), []*store.JobFinishParams{p})
	if err != nil || errs[0] != nil {
		t.Fatalf("JobFinishMany: %v %v", err, errs)
	}
}

func getJob(t testing.TB, s *Store, id int64) *idemtype.JobRow {
	t.Helper()
	j, err := s.JobGet(context.Background(), "", id)
	if err != nil {
		t.Fatalf("JobGet %d: %v", id, err)
	}
	return j
}

func TestGroupCommitOneKey(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	const n = 64
	var wg sync.WaitGroup
	results := make([]store.JobInsertResult, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s.JobInsertMany(context.Background(), &store.JobInsertManyParams{
				Jobs: []*store.JobInsertParams{keyedJob("k", "same-key", "fp")}, Now: t0})
			if err != nil {
				t.Errorf("insert: %v", err)
				return
			}
			results[i] = res[0]
		}()
	}
	wg.Wait()
	created, existing := 0, 0
	var id int64
	for _, r := range results {
		if r.Err != nil {
			t.Fatalf("item error: %v", r.Err)
		}
		if r.Existing {
			existing++
		} else {
			created++
		}
		if id == 0 {
			id = r.Job.ID
		} else if r.Job.ID != id {
			t.Fatalf("different job ids %d and %d", id, r.Job.ID)
		}
	}
	if created != 1 || existing != n-1 {
		t.Fatalf("created %d existing %d", created, existing)
	}
	jobs, _, err := s.JobList(context.Background(), &store.JobListParams{Limit: 500})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("list: %d jobs, %v", len(jobs), err)
	}
	// Another fingerprint is a KeyReusedError with the job id.
	res := insert(t, s, t0, keyedJob("k", "same-key", "other"))
	var kr *idemtype.KeyReusedError
	if !errors.As(res[0].Err, &kr) || kr.JobID != id || !errors.Is(res[0].Err, idemtype.ErrKeyReused) {
		t.Fatalf("want KeyReusedError for job %d, got %v", id, res[0].Err)
	}
}

func TestConcurrentClaims(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	const total = 2000
	ps := make([]*store.JobInsertParams, total)
	for i := range ps {
		ps[i] = job("c")
	}
	for _, r := range insert(t, s, t0, ps...) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	var mu sync.Mutex
	seen := map[int64]int{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				jobs, err := s.JobClaim(context.Background(), &store.JobClaimParams{Queues: []string{"default"},
					WorkerID: "w", Limit: 37, LeaseUntil: t0.Add(time.Minute), Now: t0})
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

func TestFIFOHead(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	a, b := job("p"), job("p")
	a.PartitionKey, b.PartitionKey = "entity-1", "entity-1"
	c := job("p")
	c.PartitionKey = "entity-2"
	res := insert(t, s, t0, a, b, c)
	got := claim(t, s, t0, 10)
	if len(got) != 2 || got[0].ID != res[0].Job.ID || got[1].ID != res[2].Job.ID {
		t.Fatalf("first claim: %v", ids(got))
	}
	// A retrying head blocks its partition.
	errs, err := s.JobFinishMany(context.Background(), []*store.JobFinishParams{{ID: got[0].ID,
		LeaseToken: got[0].LeaseToken, State: idemtype.StateRetryable, Outcome: idemtype.OutcomeFailed,
		Error: "x", RunAt: t0.Add(time.Hour), FinishedAt: t0}})
	if err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	if got := claim(t, s, t0, 10); len(got) != 0 {
		t.Fatalf("claimed behind a retrying head: %v", ids(got))
	}
	// A dead head releases it.
	got = claim(t, s, t0.Add(time.Hour), 10)
	if len(got) != 1 || got[0].ID != res[0].Job.ID || got[0].Attempt != 2 {
		t.Fatalf("retry claim: %v", ids(got))
	}
	finish(t, s, got[0], idemtype.StateDead, t0.Add(time.Hour))
	got = claim(t, s, t0.Add(time.Hour), 10)
	if len(got) != 1 || got[0].ID != res[1].Job.ID {
		t.Fatalf("after dead head: %v", ids(got))
	}
}

func ids(js []*idemtype.JobRow) []int64 {
	out := make([]int64, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}

func TestDependencies(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	root := insert(t, s, t0, job("root"))[0].Job
	child := job("child")
	child.DependsOn = []int64{root.ID}
	c := insert(t, s, t0, child)[0].Job
	if c.State != idemtype.StatePending {
		t.Fatalf("child state %s", c.State)
	}
	grand := job("grand")
	grand.DependsOn = []int64{c.ID}
	g := insert(t, s, t0, grand)[0].Job
	missing := job("x")
	missing.DependsOn = []int64{99999}
	if r := insert(t, s, t0, missing)[0]; r.Err == nil {
		t.Fatal("missing dependency accepted")
	}

	got := claim(t, s, t0, 10)
	if len(got) != 1 || got[0].ID != root.ID {
		t.Fatalf("claimed %v", ids(got))
	}
	finish(t, s, got[0], idemtype.StateCompleted, t0)
	if st := getJob(t, s, c.ID).State; st != idemtype.StateAvailable {
		t.Fatalf("child after completion: %s", st)
	}
	if st := getJob(t, s, g.ID).State; st != idemtype.StatePending {
		t.Fatalf("grandchild: %s", st)
	}

	// Cascade: a dead job cancels its pending dependants transitively.
	r2 := insert(t, s, t0, job("r2"))[0].Job
	d1 := job("d1")
	d1.DependsOn = []int64{r2.ID}
	j1 := insert(t, s, t0, d1)[0].Job
	d2 := job("d2")
	d2.DependsOn = []int64{j1.ID}
	j2 := insert(t, s, t0, d2)[0].Job
	if _, err := s.JobCancel(context.Background(), &store.JobCancelParams{ID: r2.ID, Reason: "stop", Now: t0}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{j1.ID, j2.ID} {
		j := getJob(t, s, id)
		if j.State != idemtype.StateCancelled || j.LastError == "" || j.FinishedAt == nil {
			t.Fatalf("dependant %d: %s %q", id, j.State, j.LastError)
		}
	}
	// A new job depending on a cancelled one starts cancelled.
	d3 := job("d3")
	d3.DependsOn = []int64{r2.ID}
	if j := insert(t, s, t0, d3)[0].Job; j.State != idemtype.StateCancelled {
		t.Fatalf("d3: %s", j.State)
	}
}

func TestRecords(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	ctx := context.Background()
	acq := func(owner string, now time.Time) *store.RecordAcquireResult {
		t.Helper()
		r, err := s.RecordAcquire(ctx, &store.RecordAcquireParams{Tenant: "default", Key: "k",
			Owner: owner, LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour), Now: now})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := acq("a", t0); !r.Acquired || r.Record.LeaseOwner != "a" {
		t.Fatalf("first acquire: %+v", r)
	}
	if r := acq("b", t0.Add(time.Second)); r.Acquired || r.Record.LeaseOwner != "a" {
		t.Fatalf("second acquire: %+v", r)
	}
	// Expired lease: taken over.
	if r := acq("b", t0.Add(2*time.Minute)); !r.Acquired || r.Record.LeaseOwner != "b" {
		t.Fatalf("takeover: %+v", r)
	}
	err := s.RecordComplete(ctx, &store.RecordCompleteParams{Tenant: "default", Key: "k", Owner: "a",
		Result: []byte("r"), TTL: time.Hour, Now: t0.Add(2 * time.Minute)})
	if !errors.Is(err, idemtype.ErrLeaseLost) {
		t.Fatalf("complete by old owner: %v", err)
	}
	now := t0.Add(3 * time.Minute)
	if err := s.RecordComplete(ctx, &store.RecordCompleteParams{Tenant: "default", Key: "k", Owner: "b",
		Result: []byte("r"), ResultHash: "h", TTL: 2 * time.Hour, Now: now}); err != nil {
		t.Fatal(err)
	}
	rec, err := s.RecordGet(ctx, "default", "k", now)
	if err != nil || rec.Status != idemtype.RecordCompleted || string(rec.Result) != "r" ||
		!rec.ExpiresAt.Equal(now.Add(2*time.Hour)) || rec.LeaseOwner != "" {
		t.Fatalf("record: %+v %v", rec, err)
	}
	if r := acq("c", now); r.Acquired || string(r.Record.Result) != "r" {
		t.Fatalf("acquire completed: %+v", r)
	}
	// Expired: gone for Get, and a new acquire starts afresh.
	later := now.Add(3 * time.Hour)
	if _, err := s.RecordGet(ctx, "default", "k", later); !errors.Is(err, idemtype.ErrNotFound) {
		t.Fatalf("expired get: %v", err)
	}
	if r := acq("d", later); !r.Acquired || r.Record.Status != idemtype.RecordInProgress || r.Record.Result != nil {
		t.Fatalf("acquire expired: %+v", r.Record)
	}
}

func TestJobRecordLifecycle(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	ctx := context.Background()
	p := keyedJob("k", "key-1", "fp")
	p.DedupWindow = 0
	j := insert(t, s, t0, p)[0].Job
	rec, err := s.RecordGet(ctx, "default", "key-1", t0)
	if err != nil || rec.JobID != j.ID || rec.DedupUntil != nil || rec.ExpiresAt != nil {
		t.Fatalf("record after insert: %+v %v", rec, err)
	}
	got := claim(t, s, t0, 1)
	r, err := s.RecordAcquire(ctx, &store.RecordAcquireParams{Tenant: "default", Key: "key-1",
		Owner: store.JobOwner(j.ID), JobID: j.ID, LeaseUntil: t0.Add(time.Minute), Now: t0})
	if err != nil || !r.Acquired {
		t.Fatalf("acquire: %+v %v", r, err)
	}
	fin := t0.Add(time.Second)
	finish(t, s, got[0], idemtype.StateCompleted, fin)
	rec, err = s.RecordGet(ctx, "default", "key-1", fin)
	if err != nil || rec.Status != idemtype.RecordCompleted || rec.ResultJobID != j.ID ||
		rec.DedupUntil == nil || !rec.DedupUntil.Equal(fin) || !rec.ExpiresAt.Equal(fin.Add(24*time.Hour)) ||
		rec.LeaseOwner != "" {
		t.Fatalf("record after completion: %+v %v", rec, err)
	}
	// Window closed: a new job is created, the cached result stays.
	j2 := insert(t, s, fin, p)[0]
	if j2.Existing || j2.Job.ID == j.ID {
		t.Fatalf("after window: %+v", j2)
	}
	rec, _ = s.RecordGet(ctx, "default", "key-1", fin)
	if rec.JobID != j2.Job.ID || rec.Status != idemtype.RecordCompleted || string(rec.Result) != `{"ok":true}` {
		t.Fatalf("record after reopen: %+v", rec)
	}
	// Repeat of the completion is fine; another result is not.
	p2 := &store.JobFinishParams{ID: j.ID, LeaseToken: got[0].LeaseToken, State: idemtype.StateCompleted,
		Result: json.RawMessage(`{"ok":true}`), FinishedAt: fin}
	p3 := *p2
	p3.Result = json.RawMessage(`{"ok":false}`)
	errs, err := s.JobFinishMany(ctx, []*store.JobFinishParams{p2, &p3})
	if err != nil || errs[0] != nil || !errors.Is(errs[1], idemtype.ErrLeaseLost) {
		t.Fatalf("repeat: %v %v", err, errs)
	}
}

func TestRescue(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	p := job("r")
	p.MaxAttempts = 1
	a := insert(t, s, t0, job("r"), p)
	got := claim(t, s, t0, 10)
	if len(got) != 2 {
		t.Fatalf("claimed %d", len(got))
	}
	ctx := context.Background()
	if rescued, err := s.JobRescue(ctx, &store.JobRescueParams{Now: t0.Add(30 * time.Second), Limit: 10}); err != nil || len(rescued) != 0 {
		t.Fatalf("early rescue: %v %v", rescued, err)
	}
	rescued, err := s.JobRescue(ctx, &store.JobRescueParams{Now: t0.Add(2 * time.Minute), Limit: 10})
	if err != nil || len(rescued) != 2 {
		t.Fatalf("rescue: %v %v", rescued, err)
	}
	if j := getJob(t, s, a[0].Job.ID); j.State != idemtype.StateRetryable || j.LastError == "" {
		t.Fatalf("rescued: %s", j.State)
	}
	if j := getJob(t, s, a[1].Job.ID); j.State != idemtype.StateDead || j.FinishedAt == nil {
		t.Fatalf("rescued at max attempts: %s", j.State)
	}
	att, err := s.AttemptList(ctx, "default", a[0].Job.ID)
	if err != nil || len(att) != 1 || att[0].Outcome != idemtype.OutcomeLost {
		t.Fatalf("attempts: %+v %v", att, err)
	}
	// The old lease is lost.
	errs, err := s.JobFinishMany(ctx, []*store.JobFinishParams{{ID: got[0].ID, LeaseToken: got[0].LeaseToken,
		State: idemtype.StateCompleted, FinishedAt: t0}})
	if err != nil || !errors.Is(errs[0], idemtype.ErrLeaseLost) {
		t.Fatalf("finish after rescue: %v %v", err, errs)
	}
}

func TestRetentionKeepsOpenWindow(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	ctx := context.Background()
	res := insert(t, s, t0, keyedJob("k", "kept", "fp"), job("plain"))
	for _, j := range claim(t, s, t0, 10) {
		finish(t, s, j, idemtype.StateCompleted, t0)
	}
	n, err := s.JobDeleteFinished(ctx, &store.JobDeleteFinishedParams{CompletedBefore: t0.Add(time.Minute),
		Limit: 100, Now: t0.Add(time.Minute)})
	if err != nil || n != 1 {
		t.Fatalf("retention: %d %v", n, err)
	}
	if _, err := s.JobGet(ctx, "", res[1].Job.ID); !errors.Is(err, idemtype.ErrNotFound) {
		t.Fatalf("plain job kept: %v", err)
	}
	getJob(t, s, res[0].Job.ID)
	// After the window closes it goes too.
	n, err = s.JobDeleteFinished(ctx, &store.JobDeleteFinishedParams{CompletedBefore: t0.Add(2 * time.Hour),
		Limit: 100, Now: t0.Add(2 * time.Hour)})
	if err != nil || n != 1 {
		t.Fatalf("retention after window: %d %v", n, err)
	}
}

func TestCloseAnswersPending(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.JobInsertMany(context.Background(), &store.JobInsertManyParams{
				Jobs: []*store.JobInsertParams{keyedJob("k", fmt.Sprint(i), "fp")}, Now: t0})
			if err != nil && !errors.Is(err, store.ErrClosed) {
				t.Errorf("insert: %v", err)
			}
		}()
	}
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	wg.Wait()
	if _, err := s.JobGet(context.Background(), "", 1); err == nil {
		t.Fatal("read after close")
	}
}

func TestMigrateTwice(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "idem.db")
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := Open(context.Background(), path, nil)
			if err != nil {
				t.Errorf("open: %v", err)
				return
			}
			defer s.Close()
			if err := s.Migrate(context.Background()); err != nil {
				t.Errorf("migrate: %v", err)
			}
		}()
	}
	wg.Wait()
}

func TestDeletedIDNotReused(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	ctx := context.Background()
	res := insert(t, s, t0, job("a"), job("b"))
	last := res[1].Job
	if _, err := s.JobCancel(ctx, &store.JobCancelParams{ID: last.ID, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if err := s.JobDelete(ctx, "default", last.ID, idemtype.StateCancelled); err != nil {
		t.Fatal(err)
	}
	if err := s.JobDelete(ctx, "default", last.ID, idemtype.StateCancelled); !errors.Is(err, idemtype.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if j := insert(t, s, t0, job("c"))[0].Job; j.ID <= last.ID {
		t.Fatalf("id %d reused (deleted %d)", j.ID, last.ID)
	}
}
