package cli

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// TestConfigDedupForever: seed 001 keeps its keys indefinitely, so
// jobs.dedup_window takes "forever" (idem.DedupForever) in the file and
// the environment, and --print-config shows it as such.
func TestConfigDedupForever(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, file string
		env        []string
	}{
		{"file", "[jobs]\ndedup_window = \"forever\"\n", nil},
		{"environment", "", []string{"IDEM_JOBS_DEDUP_WINDOW=forever"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := loadFile(t, tc.file, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.clientConfig(&idem.Config{}).DedupWindow; got != idem.DedupForever {
				t.Fatalf("DedupWindow %v, want idem.DedupForever", got)
			}
			text, err := printConfig(cfg)
			if err != nil || !strings.Contains(text, "dedup_window = 'forever'\n") && !strings.Contains(text, "dedup_window = \"forever\"\n") {
				t.Fatalf("--print-config (%v):\n%s", err, text)
			}
			again, err := loadFile(t, text, nil) // what it prints reads back
			if err != nil || again.clientConfig(&idem.Config{}).DedupWindow != idem.DedupForever {
				t.Fatalf("printed config read back: %v", err)
			}
		})
	}
	t.Run("durations still read", func(t *testing.T) {
		t.Parallel()
		cfg, err := loadFile(t, "", []string{"IDEM_JOBS_DEDUP_WINDOW=36h"})
		if err != nil || cfg.clientConfig(&idem.Config{}).DedupWindow != 36*time.Hour {
			t.Fatalf("36h: %v", err)
		}
	})
	t.Run("a misspelling is refused", func(t *testing.T) {
		t.Parallel()
		if _, err := loadFile(t, "", []string{"IDEM_JOBS_DEDUP_WINDOW=forevr"}); err == nil || !strings.Contains(err.Error(), "dedup_window") {
			t.Fatalf("forevr: %v, want an error naming dedup_window", err)
		}
	})
}

// TestConfigSeed002Environment: seed 002's retry settings come from the
// environment (its QUEUE_MAX_TRIES=3, QUEUE_INITIAL_BACKOFF=60,
// QUEUE_MAX_BACKOFF=3600, QUEUE_BACKOFF_MULTIPLIER=2.0, spelled as idem's
// variables) and give its schedule: 60 s, 120 s, 240 s, at most 1 h.
func TestConfigSeed002Environment(t *testing.T) {
	t.Parallel()
	cfg, err := loadFile(t, "", []string{"IDEM_JOBS_MAX_ATTEMPTS=3", "IDEM_RETRY_BASE=60", "IDEM_RETRY_MAX=3600",
		"IDEM_RETRY_FACTOR=2.0", "IDEM_RETRY_JITTER=0"})
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.clientConfig(&idem.Config{})
	if c.MaxAttempts != 3 {
		t.Errorf("MaxAttempts %d, want 3", c.MaxAttempts)
	}
	for attempt, want := range map[int]time.Duration{1: time.Minute, 2: 2 * time.Minute, 3: 4 * time.Minute, 7: time.Hour} {
		for _, draw := range []float64{0, 0.5, 0.999} { // no jitter: every draw alike
			if got := c.Retry.Delay(attempt, draw); got != want {
				t.Errorf("delay after attempt %d (draw %v) = %v, want %v", attempt, draw, got, want)
			}
		}
	}
}

// TestConfigSeed002Limits: seed 002's throttling settings from the
// environment and the file (QUEUE_MAX_JOBS_PER_TENANT=100 as
// IDEM_LIMITS_TENANT_RATE, 1,000 a minute for a queue under
// [limits.queues]) are stored when the server's client starts.
func TestConfigSeed002Limits(t *testing.T) {
	t.Parallel()
	cfg, err := loadFile(t, "[limits.queues]\nemails = \"1000/1m\"\n", []string{"IDEM_LIMITS_TENANT_RATE=100/1m"})
	if err != nil {
		t.Fatal(err)
	}
	want := []idem.Limit{{FlowScope: idem.FlowScope{Tenant: idem.EveryTenant}, Rate: 100, Period: time.Minute},
		{FlowScope: idem.FlowScope{Queue: "emails"}, Rate: 1000, Period: time.Minute}}
	c := cfg.clientConfig(&idem.Config{DisableMaintenance: true})
	if !reflect.DeepEqual(c.Limits, want) {
		t.Fatalf("limits %+v, want %+v", c.Limits, want)
	}
	st, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "idem.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	client, err := idem.NewClient(st, c)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Stop(ctx) })
	stored, err := client.LimitList(ctx, "")
	if err != nil || len(stored) != 2 {
		t.Fatalf("stored limits: %d (%v)", len(stored), err)
	}
	for _, l := range stored {
		if l.Tenant == idem.EveryTenant && (l.Rate != 100 || l.Period != time.Minute) ||
			l.Queue == "emails" && (l.Rate != 1000 || l.Period != time.Minute) {
			t.Errorf("stored %+v", *l)
		}
	}
	text, err := printConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	again, err := loadFile(t, text, nil) // what --print-config prints reads back
	if err != nil || !reflect.DeepEqual(again.clientConfig(&idem.Config{}).Limits, want) {
		t.Fatalf("printed config read back (%v):\n%s", err, text)
	}
	t.Run("none by default", func(t *testing.T) {
		t.Parallel()
		cfg, err := loadFile(t, "", nil)
		if err != nil || cfg.clientConfig(&idem.Config{}).Limits != nil {
			t.Fatalf("default limits: %v", err)
		}
	})
	t.Run("bad values name their key", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			file, env, want string
		}{
			{"", "IDEM_LIMITS_TENANT_RATE=lots", "limits.tenant_rate"},
			{"", "IDEM_LIMITS_TENANT_CONCURRENCY=-1", "limits.tenant_concurrency"},
			{"[limits.queues]\nemails = \"1000\"\n", "", "limits.queues.emails"},
			{"[limits.queues]\n\"bad queue\" = \"1/1m\"\n", "", "limits.queues.bad queue"},
			{"", "IDEM_LIMITS_TENANT_RATE=3000000000/1m", "limits.tenant_rate"},
			{"", "IDEM_LIMITS_TENANT_CONCURRENCY=3000000000", "limits.tenant_concurrency"},
			{"[limits.queues]\nemails = \"3000000000/1m\"\n", "", "limits.queues.emails"},
		} {
			var env []string
			if tc.env != "" {
				env = []string{tc.env}
			}
			if _, err := loadFile(t, tc.file, env); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%q %q: %v, want an error naming %s", tc.file, tc.env, err, tc.want)
			}
		}
	})
}
