package cli

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// newClientRefuses reports whether idem.NewClient, over a real SQLite
// store, refuses the idem.Config `idem serve` builds from cfg.
func newClientRefuses(t *testing.T, cfg *ServeConfig) error {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "idem.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	_, err = idem.NewClient(st, cfg.clientConfig(&idem.Config{}))
	return err
}

// TestConfigScheduleGraceReachesTheRuntime: maintenance.schedule_grace
// and maintenance.schedule_interval (file or IDEM_MAINTENANCE_*) arrive in
// the idem.Config, so a leader_ttl of a minute or more is possible with a
// longer grace, and idem.NewClient accepts the pair. There was no setting
// for the grace: leader_ttl had to stay under its default, 1 minute.
func TestConfigScheduleGraceReachesTheRuntime(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, file           string
		env                  []string
		ttl, grace, interval time.Duration
	}{
		{"defaults", "", nil, idem.DefaultLeaderTTL, idem.DefaultScheduleGrace, idem.DefaultScheduleInterval},
		{"file", "[maintenance]\nleader_ttl = \"2m\"\nschedule_grace = \"5m\"\nschedule_interval = \"3s\"\n", nil,
			2 * time.Minute, 5 * time.Minute, 3 * time.Second},
		{"environment", "", []string{"IDEM_MAINTENANCE_LEADER_TTL=90s", "IDEM_MAINTENANCE_SCHEDULE_GRACE=10m",
			"IDEM_MAINTENANCE_SCHEDULE_INTERVAL=2"}, 90 * time.Second, 10 * time.Minute, 2 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := loadFile(t, c.file, c.env)
			if err != nil {
				t.Fatal(err)
			}
			ic := cfg.clientConfig(&idem.Config{})
			if ic.LeaderTTL != c.ttl || ic.ScheduleGrace != c.grace || ic.ScheduleInterval != c.interval {
				t.Fatalf("LeaderTTL %v ScheduleGrace %v ScheduleInterval %v, want %v %v %v",
					ic.LeaderTTL, ic.ScheduleGrace, ic.ScheduleInterval, c.ttl, c.grace, c.interval)
			}
			if err := newClientRefuses(t, cfg); err != nil {
				t.Fatalf("idem.NewClient refuses what serve accepted: %v", err)
			}
		})
	}
}

// TestConfigIntervalsArePositive: maintenance.schedule_grace,
// maintenance.schedule_interval and jobs.poll_interval of 0 or below are
// refused naming the key (idem would read 0 as its default).
func TestConfigIntervalsArePositive(t *testing.T) {
	t.Parallel()
	checkConfigRefusals(t, []configRefusal{
		{"[maintenance]\nschedule_grace = 0\n", "", "maintenance.schedule_grace 0s: want a positive duration"},
		{"[maintenance]\nschedule_grace = \"-1m\"\n", "", "maintenance.schedule_grace -1m0s: want a positive duration"},
		{"[maintenance]\nschedule_interval = 0\n", "", "maintenance.schedule_interval 0s: want a positive duration"},
		{"[jobs]\npoll_interval = 0\n", "", "jobs.poll_interval 0s: want a positive duration"},
		{"", "IDEM_JOBS_POLL_INTERVAL=-1s", "jobs.poll_interval (IDEM_JOBS_POLL_INTERVAL) -1s: want a positive duration"},
	})
}

// TestConfigLeaderTTLUnderScheduleGrace: a leader_ttl at or over the
// schedule grace is refused at load, naming both keys (and the variable
// that set either), exit code 2, as idem.NewClient refuses it — unless
// maintenance is disabled, which both accept.
func TestConfigLeaderTTLUnderScheduleGrace(t *testing.T) {
	t.Parallel()
	const both = "maintenance.leader_ttl 1m0s is not under maintenance.schedule_grace 1m0s"
	checkConfigRefusals(t, []configRefusal{
		{"[maintenance]\nleader_ttl = \"1m\"\n", "", both},
		{"[maintenance]\nleader_ttl = \"20s\"\nschedule_grace = \"20s\"\n", "", "maintenance.schedule_grace 20s"},
		{"[maintenance]\nleader_ttl = \"2m\"\nschedule_grace = \"90s\"\n", "", "maintenance.leader_ttl 2m0s is not under"},
		{"", "IDEM_MAINTENANCE_LEADER_TTL=1m", "maintenance.leader_ttl (IDEM_MAINTENANCE_LEADER_TTL) 1m0s is not under"},
		{"", "IDEM_MAINTENANCE_SCHEDULE_GRACE=5s", "maintenance.schedule_grace (IDEM_MAINTENANCE_SCHEDULE_GRACE) 5s"},
	})

	// The refused pair is the one idem.NewClient refuses; with maintenance
	// disabled both accept it.
	refused, err := loadFile(t, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	refused.Maintenance.LeaderTTL = Duration(time.Minute)
	if err := newClientRefuses(t, refused); !errors.Is(err, idem.ErrInvalid) {
		t.Fatalf("idem.NewClient with LeaderTTL = ScheduleGrace: %v, want ErrInvalid (the rule serve checks)", err)
	}
	disabled, err := loadFile(t, "[maintenance]\ndisabled = true\nleader_ttl = \"1m\"\n", nil)
	if err != nil {
		t.Fatalf("maintenance disabled: %v (idem.NewClient does not check the pair then)", err)
	}
	if err := newClientRefuses(t, disabled); err != nil {
		t.Fatalf("idem.NewClient, maintenance disabled: %v", err)
	}
}

// TestServeRefusesLeaderTTLOverGrace: `idem serve` with a leader_ttl not
// under the grace stops at start-up with exit code 2, naming both keys in
// the file's terms, before the database is created (the refusal used to
// come from idem.NewClient, naming Go fields, after the database was
// created and migrated).
func TestServeRefusesLeaderTTLOverGrace(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "idem.db")
	path := writeConfig(t, "[maintenance]\nleader_ttl = \"1m\"\n")
	_, errs, code := run(t, "serve", "--config", path, "--listen", "127.0.0.1:0", "--database", db)
	if code != ExitUsage {
		t.Fatalf("exit %d, want %d: %s", code, ExitUsage, errs)
	}
	for _, w := range []string{"maintenance.leader_ttl 1m0s is not under maintenance.schedule_grace 1m0s",
		"raise the grace", "hint: "} {
		if !strings.Contains(errs, w) {
			t.Errorf("stderr lacks %q:\n%s", w, errs)
		}
	}
	if _, err := os.Stat(db); err == nil {
		t.Error("the database was created before the configuration was refused")
	}
}
