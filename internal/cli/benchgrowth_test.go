package cli

import (
	"regexp"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/dbtest"
)

// settledRe matches a PostgreSQL line of 300 waiting and 250 finished jobs
// whose settle step enqueued whole batches (1,000 or 2,000 jobs).
var settledRe = regexp.MustCompile(`\| 300 \| 250 \| [0-9.]+ \| [12],000 \([0-9,]+\) \|`)

// TestBenchGrowth: on both stores, the pre-fill copies the template jobs
// and the run prints one line per size; on PostgreSQL the claim's plan
// (the store's own statement, EXPLAINed) follows.
func TestBenchGrowth(t *testing.T) {
	t.Parallel()
	args := []string{"bench-growth", "--waiting", "0,300", "--finished", "250", "--enqueue", "200", "--singles", "40", "--claims", "3", "--claim-n", "50", "--timeout", "2m"}
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		out, errs, code := run(t, args...)
		if code != 0 || !strings.Contains(out, "| 300 | 250 | ") || !strings.Contains(out, "| 0 | 250 | ") || !strings.Contains(out, " | n/a | ") {
			t.Fatalf("bench-growth: %d %q %q", code, out, errs)
		}
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		url := dbtest.PostgresURL(t)
		out, errs, code := run(t, append(args, "--database", url)...)
		// The settle step used up the room the bulk copy left on the
		// history's pages: at least one batch of 1,000, and it stopped.
		if code != 0 || !settledRe.MatchString(out) || !strings.Contains(out, "claim plan, 300 waiting") ||
			!strings.Contains(out, "Buffers: shared") || !strings.Contains(out, "jobs_claim_tenant_idx") {
			t.Fatalf("bench-growth: %d %q %q", code, out, errs)
		}
	})
}
