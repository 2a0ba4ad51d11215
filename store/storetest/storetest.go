// Package storetest is the conformance suite every store backend runs.
//
// A backend's test calls Run with a constructor that returns a fresh,
// migrated, empty store for each subtest (the constructor registers a
// t.Cleanup that closes it):
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { return newTestStore(t) })
//	}
//
// The suite only uses the store.Store interface. Every doc comment of package
// store is a requirement tested here. Time-dependent behaviour is tested with
// explicit Now values (a fixed base time plus offsets), never by sleeping.
// The suite's Now must therefore decide expiry of leases and leader terms:
// a store whose expiry clock is the database's (pgstore by default) runs
// the suite in its caller-clock mode (pgstore.Config.CallerClock) and tests
// its database clock on its own.
package storetest

import (
	"testing"

	"github.com/idem-dev/idem/store"
)

// testCase is one behaviour of the contract, run on its own store.
type testCase struct {
	name string
	fn   func(t *testing.T, s store.Store)
}

// Run runs the whole conformance suite. newStore must return a fresh,
// migrated, empty store each time it is called; every subtest gets its own
// and runs in parallel with the others.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	var all []testCase
	all = append(all, insertCases()...)
	all = append(all, idempotencyCases()...)
	all = append(all, keyedBatchCases()...)
	all = append(all, raceCases()...)
	all = append(all, racePathCases()...)
	all = append(all, claimCases()...)
	all = append(all, claimDueFlowCases()...)
	all = append(all, claimTokenCases()...)
	all = append(all, heartbeatCases()...)
	all = append(all, finishCases()...)
	all = append(all, recordCases()...)
	all = append(all, recordForgetCases()...)
	all = append(all, recordDeleteCases()...)
	all = append(all, recordLeaseCases()...)
	all = append(all, recordWindowCases()...)
	all = append(all, recordTTLCases()...)
	all = append(all, recordJobLeaseCases()...)
	all = append(all, seedCases()...)
	all = append(all, batchFinishCases()...)
	all = append(all, batchViewCases()...)
	all = append(all, cancelCases()...)
	all = append(all, cancelHoldCases()...)
	all = append(all, cancelHoldPlainCases()...)
	all = append(all, cancelHoldLimitCases()...)
	all = append(all, retryHoldTokenCases()...)
	all = append(all, recordReleaseRunCases()...)
	all = append(all, retryCases()...)
	all = append(all, retryOrderCases()...)
	all = append(all, retryDepCases()...)
	all = append(all, retryKeyCases()...)
	all = append(all, boundCases()...)
	all = append(all, queryCases()...)
	all = append(all, kindStatsCases()...)
	all = append(all, maintenanceCases()...)
	all = append(all, leaderCases()...)
	all = append(all, apiKeyCases()...)
	all = append(all, targetCases()...)
	all = append(all, eventCases()...)
	all = append(all, scheduleCases()...)
	all = append(all, scheduleFireCases()...)
	all = append(all, scheduleMarkCases()...)
	all = append(all, timeoutCases()...)
	all = append(all, lifecycleCases()...)
	all = append(all, counterCases()...)
	all = append(all, listenCases()...)
	all = append(all, cancelHoldWakeCases()...)
	all = append(all, dependantsRepairCases()...)
	all = append(all, dependantsAnnounceCases()...)
	all = append(all, claimDueAnnounceCases(false)...)
	all = append(all, flowCases()...)
	all = append(all, flowDefaultCases()...)
	all = append(all, recordKeptTTLCases()...)
	all = append(all, dlqCases()...)
	all = append(all, retentionKeyCases()...)
	all = append(all, throttleWorkCases()...)
	runCases(t, all, newStore)
}

// runCases runs each case in parallel on its own store from newStore.
func runCases(t *testing.T, cases []testCase, newStore func(t *testing.T) store.Store) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, newStore(t))
		})
	}
}
