package pgstore

import (
	"testing"

	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/storetest"
)

// TestCancelHoldCountsOnEveryClaimPath runs the conformance cases of a
// cancelled job holding its partition under concurrency limits
// (storetest.RunCancelHoldLimits) on each limited claim path: the general
// (locking) claim alone, the one-round-trip claim (qClaimOneLimited)
// tried on every claim, and the reserved claim (claim_reserved.go). Each
// counts running jobs in SQL of its own; each must count the hold. A path
// that took no claim of its case would test nothing: it is checked.
func TestCancelHoldCountsOnEveryClaimPath(t *testing.T) {
	onEveryLimitedClaimPath(t, storetest.RunCancelHoldLimits)
}

// onEveryLimitedClaimPath runs conformance cases (run: a storetest
// Run… function) on each limited claim path of the store: the general
// (locking) claim alone, the one-round-trip claim (qClaimOneLimited) tried
// on every claim, and the reserved claim (claim_reserved.go). A path that
// took no claim of its cases would test nothing: it is checked.
func onEveryLimitedClaimPath(t *testing.T, run func(t *testing.T, newStore func(t *testing.T) store.Store)) {
	t.Parallel()
	dbtest.PostgresURL(t)
	for _, c := range []struct {
		name      string
		mode      oneRoundMode
		noReserve bool
		took      func(s *Store) int64
	}{
		{"general", oneRoundNever, true, nil},
		{"one_round", oneRoundAlways, true, func(s *Store) int64 { return s.oneRoundTaken.Load() }},
		{"reserved", oneRoundAlways, false, func(s *Store) int64 { return s.reservedTaken.Load() }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			run(t, func(t *testing.T) store.Store {
				s := newTestStore(t, 4)
				s.oneRoundMode, s.noReserve = c.mode, c.noReserve
				if c.took != nil {
					t.Cleanup(func() {
						if c.took(s) == 0 {
							t.Errorf("the %s claim took no claim of the case", c.name)
						}
					})
				}
				return s
			})
		})
	}
}
