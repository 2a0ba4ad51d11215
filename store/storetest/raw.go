package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// Raw is what a store's conformance test adds to its store type (in its
// _test.go files only, so no program can call it) for the suite to build
// states no store call makes: a release that a node of an older version,
// or a bug, missed. The suite finds it by a type assertion on the stores
// Run's newStore returns.
type Raw interface {
	// RawSetFinal puts job id in final state (completed, dead, cancelled)
	// with finished_at at and its lease end cleared (a cancelled job's
	// hold ended), as a finish (or the end of a hold) writes the job's own
	// row, and nothing else: no attempt, its record untouched, its
	// pending dependants neither released nor cancelled.
	RawSetFinal(ctx context.Context, id int64, state idemtype.JobState, at time.Time) error
}

// rawSetFinal is Raw.RawSetFinal on s, failing the test on an error or
// when s has no Raw.
func rawSetFinal(t *testing.T, s store.Store, id int64, state idemtype.JobState, at time.Time) {
	t.Helper()
	r, ok := s.(Raw)
	if !ok {
		t.Fatalf("the store under test has no storetest.Raw (its conformance test adds it)")
	}
	if err := r.RawSetFinal(t.Context(), id, state, at); err != nil {
		t.Fatalf("RawSetFinal(%d, %s): %v", id, state, err)
	}
}
