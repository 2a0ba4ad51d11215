package pgstore

import (
	"testing"

	"github.com/idem-dev/idem/store/storetest"
)

// TestThrottleOnlyWithWorkOnEveryClaimPath runs the conformance cases of
// throttling counted only when a limit held work back
// (storetest.RunThrottleWork) on each limited claim path: the general
// (locking) claim alone, the one-round-trip claim (qClaimOneLimited) tried
// on every claim, and the reserved claim (claim_reserved.go). Each decides
// in code of its own which spent limits throttled a claim. A path that
// took no claim of its case would test nothing: it is checked.
func TestThrottleOnlyWithWorkOnEveryClaimPath(t *testing.T) {
	onEveryLimitedClaimPath(t, storetest.RunThrottleWork)
}
