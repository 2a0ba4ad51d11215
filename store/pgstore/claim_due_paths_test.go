package pgstore

import (
	"testing"

	"github.com/idem-dev/idem/store/storetest"
)

// TestClaimDueOnEveryClaimPath runs the conformance cases of due scheduled
// and retryable jobs under flow control with no promoter
// (storetest.RunClaimDueFlow) on each limited claim path: the general
// (locking) claim alone, the one-round-trip claim (qClaimOneLimited) tried
// on every claim, and the reserved claim (claim_reserved.go). Each path
// must make the due jobs of its queue available before it reads them, and
// before it tells whether a spent limit held work back. (The paths without
// limits run them in the conformance suite.)
func TestClaimDueOnEveryClaimPath(t *testing.T) {
	onEveryLimitedClaimPath(t, storetest.RunClaimDueFlow)
}

// TestClaimDueAnnounceOnEveryClaimPath runs the conformance cases of a
// claim that leaves promoted jobs available (storetest.RunClaimDueAnnounce:
// it announces its queue; one that takes them all does not) on each
// limited claim path, as TestClaimDueOnEveryClaimPath does.
func TestClaimDueAnnounceOnEveryClaimPath(t *testing.T) {
	onEveryLimitedClaimPath(t, storetest.RunClaimDueAnnounce)
}
