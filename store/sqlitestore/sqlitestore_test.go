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
	"github.com/idem-dev/idem/internal/filetemplate"
	"github.com/idem-dev/idem/store"
)

var t0 = time.Date(2031, time.March, 4, 5, 6, 7, 123456000, time.UTC)

// testTemplate is a database migrated once per test process, as
// internal/sqlitetest makes it (this package's tests cannot import that
// one, which imports this package).
var testTemplate = filetemplate.New(func(path string) error {
	s, err := Open(context.Background(), path, nil)
	if err != nil {
		return err
	}
	return s.Close() // checkpoints the WAL into the file and removes it
}, "-wal")

// openTest opens a new store in t.TempDir(): a copy of testTemplate, so
// that every test does not run every migration again; with
// cfg.SkipMigrate a new, empty file.
func openTest(t testing.TB, cfg *Config) *Store {
	t.Helper()
	var path string
	if cfg != nil && cfg.SkipMigrate {
		path = filepath.Join(t.TempDir(), "idem.db")
	} else {
		path = testTemplate.Copy(t, "idem.db")
	}
	s, err := Open(context.Background(), path, cfg)
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
	j, err := s.JobGet(context.Background(), &store.JobGetParams{Tenant: "", ID: id})
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

func TestJobRecordLifecycle(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	ctx := context.Background()
	p := keyedJob("k", "key-1", "fp")
	p.DedupWindow = 0
	j := insert(t, s, t0, p)[0].Job
	rec, err := s.RecordGet(ctx, &store.RecordGetParams{Tenant: "default", Key: "key-1", Now: t0})
	// Window 0: no dedup_until while the job is unfinished; the expiry is
	// projected from the job (available now: now + its result TTL).
	if err != nil || rec.JobID != j.ID || rec.DedupUntil != nil || rec.ExpiresAt == nil ||
		!rec.ExpiresAt.Equal(t0.Add(p.ResultTTL)) {
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
	rec, err = s.RecordGet(ctx, &store.RecordGetParams{Tenant: "default", Key: "key-1", Now: fin})
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
	rec, _ = s.RecordGet(ctx, &store.RecordGetParams{Tenant: "default", Key: "key-1", Now: fin})
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
	if _, err := s.JobGet(ctx, &store.JobGetParams{Tenant: "", ID: res[1].Job.ID}); !errors.Is(err, idemtype.ErrNotFound) {
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
	if _, err := s.JobGet(context.Background(), &store.JobGetParams{Tenant: "", ID: 1}); err == nil {
		t.Fatal("read after close")
	}
}

func TestMigrateTwice(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "idem.db")
	var wg sync.WaitGroup
	for range 8 { // several Stores opening one new file at once race to switch it to WAL
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
	if err := s.JobDelete(ctx, &store.JobDeleteParams{Tenant: "default", ID: last.ID, State: idemtype.StateCancelled}); err != nil {
		t.Fatal(err)
	}
	if err := s.JobDelete(ctx, &store.JobDeleteParams{Tenant: "default", ID: last.ID, State: idemtype.StateCancelled}); !errors.Is(err, idemtype.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if j := insert(t, s, t0, job("c"))[0].Job; j.ID <= last.ID {
		t.Fatalf("id %d reused (deleted %d)", j.ID, last.ID)
	}
}
