package cli

import (
	"strings"
	"testing"
)

// TestTargetsStatsJSONIsAnObject: `idem targets stats --json` prints an
// object keyed by target, {} when no target had a delivery in the last
// hour. It printed null then (the API leaves the empty map out), which a
// script reading the object (jq 'keys', to_entries) fails on.
func TestTargetsStatsJSONIsAnObject(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	out, errs, code := e.run("targets", "stats", "--json")
	if code != ExitOK || strings.TrimSpace(out) != "{}" {
		t.Fatalf("targets stats --json without deliveries: exit %d, stdout %q (want {}), stderr %q", code, out, errs)
	}
}
