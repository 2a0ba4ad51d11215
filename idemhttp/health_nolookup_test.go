package idemhttp_test

import (
	"testing"

	"github.com/idem-dev/idem/idemhttp"
)

// TestHealthHitRateWithoutLookups: with hit_rate_min_lookups 0 (grade from
// the first lookup), a server with no lookup yet has no hit rate to grade:
// the check is healthy, as the success rate is with no attempt. It graded
// the rate of no lookups, 0, as below the threshold: a fresh server was
// degraded.
func TestHealthHitRateWithoutLookups(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, &setupOpts{serverCfg: &idemhttp.Config{Health: idemhttp.HealthConfig{HitRateMinLookups: idemhttp.HealthZero}}})
	status, checks := e.healthOf(e.admin)
	wantCheck(t, checks, "cache_hit_rate", "healthy")
	if status != "healthy" {
		t.Fatalf("a fresh server: status %s %v", status, checks)
	}
}
