package cli

import (
	"strings"
	"testing"
	"time"
)

// TestConfigRejectsValuesOutOfRange: a value that cannot mean what it says
// stops start-up naming its key instead of being bent into another value:
// a number or boolean where text is wanted (listen = 8080 became "8080"),
// integer seconds past what a duration holds (18446744074 s wrapped to
// 0.29 s, so completed jobs were deleted at once), a boolean as a
// duration (1 ns), a fractional count (2.7 attempts became 2), a lease
// shorter than idem's minimum (refused later by idem without the key), a
// jitter outside 0–1 (negative was silently "none", NaN passed), a factor
// that is not finite, a retry max below its base (base ignored), and a negative
// retention, dedup window or auth cache TTL (which meant "keep", "none"
// or "no cache" by accident of idem's encoding), and a queue or kind name
// no job can have in retry_by_queue, retry_by_kind or result_ttl_by_kind
// (a policy that never applied).
func TestConfigRejectsValuesOutOfRange(t *testing.T) {
	t.Parallel()
	checkConfigRefusals(t, []configRefusal{
		{"[retention]\ncompleted = 18446744074\n", "", "retention.completed"},
		{"", "IDEM_RETENTION_COMPLETED=18446744074", "retention.completed"},
		{"[jobs]\nlease = 1e30\n", "", "jobs.lease"},
		{"[retry]\ndelays = [1, 18446744074]\n", "", "retry.delays"},
		{"[jobs]\nlease = true\n", "", "lease"},
		{"[jobs]\nlease = \"500ms\"\n", "", "jobs.lease"},
		{"[jobs]\nmax_attempts = 2.7\n", "", "max_attempts"},
		{"[jobs]\nmax_attempts = 5000\n", "", "jobs.max_attempts"},
		{"[retry]\njitter = -0.5\n", "", "retry.jitter"},
		{"", "IDEM_RETRY_JITTER=-1", "retry.jitter"},
		{"[retry]\njitter = nan\n", "", "retry.jitter"},
		{"[retry_by_kind.x]\nfactor = inf\n", "", "retry_by_kind.x.factor"},
		{"[retry]\nbase = \"2h\"\n", "", "retry.max"},
		{"[retry_by_queue.q]\nbase = \"10s\"\nmax = \"5s\"\n", "", "retry_by_queue.q.max"},
		{"[retention]\ncompleted = -5\n", "", "retention.completed"},
		{"", "IDEM_RETENTION_DEAD=-1h", "retention.dead"},
		{"[jobs]\ndedup_window = \"-1s\"\n", "", "jobs.dedup_window"},
		{"[http]\nauth_cache_ttl = -5\n", "", "http.auth_cache_ttl"},
		{"listen = 8080\n", "", "listen"},
		{"listen = \"127.0.0.1:abc\"\n", "", "listen"},
		{"", "IDEM_OPS_LISTEN=127.0.0.1:70000", "ops_listen"},
		{"listen = \"localhost\"\n", "", "listen"},
		{"database = true\n", "", "database"},
		{"[retry_by_kind.\"send email\"]\nbase = \"1s\"\n", "", "retry_by_kind.send email"},
		{"[retry_by_queue.\"\"]\nbase = \"1s\"\n", "", "retry_by_queue."},
		{"[jobs.result_ttl_by_kind]\n\"a report\" = \"1h\"\n", "", "jobs.result_ttl_by_kind.a report"},
	})
}

// TestConfigIntegersAreDecimal: an integer from the environment is read in
// base 10, as written: IDEM_JOBS_MAX_ATTEMPTS=010 is 10 attempts, not
// octal 8, and 0x10 is refused.
func TestConfigIntegersAreDecimal(t *testing.T) {
	t.Parallel()
	cfg, err := loadFile(t, "", []string{"IDEM_JOBS_MAX_ATTEMPTS=010", "IDEM_HEALTH_DEAD_JOBS=0100"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Jobs.MaxAttempts != 10 || cfg.Health.DeadJobs != 100 {
		t.Fatalf("max_attempts %d, dead_jobs %d: want 10 and 100", cfg.Jobs.MaxAttempts, cfg.Health.DeadJobs)
	}
	if _, err := loadFile(t, "", []string{"IDEM_JOBS_MAX_ATTEMPTS=0x10"}); err == nil || !strings.Contains(err.Error(), "max_attempts") {
		t.Fatalf("IDEM_JOBS_MAX_ATTEMPTS=0x10: err %v, want one naming max_attempts", err)
	}
}

// TestConfigRetryDelaysFromTheEnvironment: retry.delays, a list like
// http.cors_origins, is read from IDEM_RETRY_DELAYS (comma-separated) as
// every key is; it used to be ignored without a word (the default backoff
// stayed).
func TestConfigRetryDelaysFromTheEnvironment(t *testing.T) {
	t.Parallel()
	cfg, err := loadFile(t, "[retry]\ndelays = [\"2s\"]\n", []string{"IDEM_RETRY_DELAYS=1s, 5s,25"})
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Retry.Delays
	if len(got) != 3 || time.Duration(got[0]) != time.Second || time.Duration(got[1]) != 5*time.Second || time.Duration(got[2]) != 25*time.Second {
		t.Fatalf("retry.delays %v, want [1s 5s 25s]", got)
	}
	if _, err := loadFile(t, "", []string{"IDEM_RETRY_DELAYS=1s,soon"}); err == nil || !strings.Contains(err.Error(), "delays") {
		t.Fatalf("IDEM_RETRY_DELAYS=1s,soon: err %v, want one naming delays", err)
	}
}
