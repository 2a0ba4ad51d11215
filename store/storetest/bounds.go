package storetest

import (
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// boundCases: selections as long as a caller makes them (a DLQ requeue of
// a long list of ids, a filter repeating a state) work on every store,
// whatever the store's own limits on a statement's parameters.
func boundCases() []testCase {
	return []testCase{
		{"JobRetryMany/any_number_of_ids", testRetryManyIDs},
		{"JobList/repeated_states", testListRepeatedStates},
	}
}

// testRetryManyIDs: JobRetryMany by ids takes any number of ids (a DLQ
// requeue of a long selection): 40,000 ids, one of them dead, move that one.
func testRetryManyIDs(t *testing.T, s store.Store) {
	dead := killJob(t, s, insert1(t, s, at(0), newJob("dead")), at(0))
	sel := make([]int64, 0, 40_001)
	for i := range int64(40_000) {
		sel = append(sel, dead.ID+1000+i)
	}
	sel = append(sel, dead.ID)
	moved, err := s.JobRetryMany(t.Context(), &store.JobRetryManyParams{IDs: sel,
		FromStates: []idemtype.JobState{idemtype.StateDead}, Now: at(time.Hour)})
	if err != nil {
		t.Fatalf("JobRetryMany with %d ids: %v", len(sel), err)
	}
	wantIDs(t, "moved", ids(moved), []int64{dead.ID})
}

// testListRepeatedStates: a filter naming one state 40,000 times selects
// the jobs in that state, in JobList and in JobRetryMany by filter.
func testListRepeatedStates(t *testing.T, s store.Store) {
	dead := killJob(t, s, insert1(t, s, at(0), newJob("dead")), at(0))
	insert1(t, s, at(0), newJob("live"))
	states := make([]idemtype.JobState, 40_000)
	for i := range states {
		states[i] = idemtype.StateDead
	}
	got, _, err := s.JobList(t.Context(), &store.JobListParams{Filter: store.JobFilter{Tenant: "default", States: states}, Limit: 10})
	if err != nil {
		t.Fatalf("JobList with %d states: %v", len(states), err)
	}
	wantIDs(t, "listed", ids(got), []int64{dead.ID})
	moved, err := s.JobRetryMany(t.Context(), &store.JobRetryManyParams{Filter: store.JobFilter{Tenant: "default", States: states},
		FromStates: []idemtype.JobState{idemtype.StateDead}, Now: at(time.Hour)})
	if err != nil {
		t.Fatalf("JobRetryMany by a filter with %d states: %v", len(states), err)
	}
	wantIDs(t, "moved", ids(moved), []int64{dead.ID})
}
