package pgstore

import (
	"testing"

	"github.com/idem-dev/idem/store"
)

// The store vacuums jobs after VacuumEvery claimed jobs, and the VACUUM
// succeeds on the pool's connections (it cannot run in a transaction).
func TestVacuumAfterClaims(t *testing.T) {
	t.Parallel()
	s := newTestStoreCfg(t, 4, &Config{VacuumEvery: 50})
	ran := make(chan error, 4)
	s.vac.afterRun = func(err error) { ran <- err }
	batch := make([]*store.JobInsertParams, 60)
	for i := range batch {
		batch[i] = benchJob()
	}
	if _, err := s.JobInsertMany(t.Context(), &store.JobInsertManyParams{Jobs: batch}); err != nil {
		t.Fatal(err)
	}
	jobs, err := s.JobClaim(t.Context(), claimParams(30))
	if err != nil || len(jobs) != 30 {
		t.Fatalf("claim: %d jobs, %v", len(jobs), err)
	}
	select {
	case err := <-ran:
		t.Fatalf("vacuum after 30 of 50 claimed jobs: %v", err)
	default:
	}
	if jobs, err = s.JobClaim(t.Context(), claimParams(30)); err != nil || len(jobs) != 30 {
		t.Fatalf("claim: %d jobs, %v", len(jobs), err)
	}
	if err := <-ran; err != nil {
		t.Fatalf("vacuum: %v", err)
	}
}

// VacuumEvery < 0 turns the store's own VACUUM off.
func TestVacuumOff(t *testing.T) {
	t.Parallel()
	s := newTestStoreCfg(t, 2, &Config{VacuumEvery: -1})
	if s.vac != nil {
		t.Fatal("vacuumer started with VacuumEvery -1")
	}
	s.noteClaimed(1_000_000) // no vacuumer: nothing to do
}
