package pgstore

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store"
)

func job(kind string) *store.JobInsertParams {
	return &store.JobInsertParams{Tenant: "default", Queue: "default", Kind: kind,
		Args: json.RawMessage(`{}`), MaxAttempts: 3, RunAt: time.Now()}
}

func complete(j *idemtype.JobRow) *store.JobFinishParams {
	return &store.JobFinishParams{ID: j.ID, LeaseToken: j.LeaseToken, State: idemtype.StateCompleted,
		Outcome: idemtype.OutcomeCompleted, Result: json.RawMessage(`{}`), FinishedAt: time.Now()}
}

func claimParams(limit int) *store.JobClaimParams {
	return &store.JobClaimParams{Queues: []string{"default"}, WorkerID: "w", Limit: limit,
		LeaseUntil: time.Now().Add(time.Minute)}
}

// Sixty-four inserters of one key, each on its own connection, create one job.
func TestConcurrentInsertOneKey(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, 64)
	const n = 64
	// Hold every connection open first so the inserts really overlap.
	// A failed acquire releases the ones held before it fails the test:
	// a connection left acquired would make the store's Close wait forever.
	conns := make([]func(), 0, n)
	releaseAll := func() {
		for _, release := range conns {
			release()
		}
		conns = conns[:0]
	}
	for range n {
		c, err := s.pool.Acquire(t.Context())
		if err != nil {
			releaseAll()
			t.Fatal(err)
		}
		conns = append(conns, c.Release)
	}
	releaseAll()
	start := make(chan struct{})
	ids := make([]int64, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			p := job("k")
			p.IdempotencyKey, p.Fingerprint, p.DedupWindow = "K", "fp", time.Hour
			res, err := s.JobInsertMany(t.Context(), &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{p}})
			if err != nil || res[0].Err != nil {
				t.Errorf("insert %d: %v %v", i, err, res)
				return
			}
			ids[i] = res[0].Job.ID
		})
	}
	close(start)
	wg.Wait()
	for i, id := range ids {
		if id != ids[0] {
			t.Fatalf("insert %d got job %d, insert 0 got %d", i, id, ids[0])
		}
	}
	jobs, _, err := s.JobList(t.Context(), &store.JobListParams{Limit: 500})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("jobs after 64 inserts of one key: %d (%v)", len(jobs), err)
	}
}

// Two dependencies completing in concurrent transactions release their
// dependant (no write skew).
func TestConcurrentDependencies(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, 8)
	for round := range 20 {
		res, err := s.JobInsertMany(t.Context(), &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{job("a"), job("b")}})
		if err != nil {
			t.Fatal(err)
		}
		d := job("d")
		d.DependsOn = []int64{res[0].Job.ID, res[1].Job.ID}
		dr, err := s.JobInsertMany(t.Context(), &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{d}})
		if err != nil || dr[0].Job.State != idemtype.StatePending {
			t.Fatalf("dependant: %v %+v", err, dr)
		}
		jobs, err := s.JobClaim(t.Context(), claimParams(2))
		if err != nil || len(jobs) != 2 {
			t.Fatalf("claim: %v %d", err, len(jobs))
		}
		var wg sync.WaitGroup
		for _, j := range jobs {
			wg.Go(func() {
				if _, err := s.JobFinishMany(t.Context(), []*store.JobFinishParams{complete(j)}); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		got, err := s.JobGet(t.Context(), &store.JobGetParams{Tenant: "", ID: dr[0].Job.ID})
		if err != nil || got.State != idemtype.StateAvailable {
			t.Fatalf("round %d: dependant %v %v, want available", round, got.State, err)
		}
		if _, err := s.JobCancel(t.Context(), &store.JobCancelParams{ID: got.ID, Reason: "done"}); err != nil {
			t.Fatal(err)
		}
	}
}

// Four goroutines migrating one schema at once all succeed.
func TestConcurrentMigrate(t *testing.T) {
	t.Parallel()
	url, schema := dbtest.NewSchema(t)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			s, err := Open(t.Context(), withPoolSize(url, 2), &Config{Schema: schema})
			if err != nil {
				t.Error(err)
				return
			}
			defer s.Close()
			if err := s.Migrate(t.Context()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	s, err := Open(t.Context(), withPoolSize(url, 2), &Config{Schema: schema, SkipMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.MigrationStatus(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range st {
		if !m.Applied {
			t.Errorf("migration %d not applied", m.Version)
		}
	}
	if err := s.MigrateDown(t.Context(), 0); err != nil {
		t.Fatalf("migrate down: %v", err)
	}
	st, _ = s.MigrationStatus(t.Context())
	for _, m := range st {
		if m.Applied {
			t.Errorf("migration %d still applied after down", m.Version)
		}
	}
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("migrate up again: %v", err)
	}
}
