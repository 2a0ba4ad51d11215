package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/idem-dev/idem/idemhttp"
)

// writeConfig writes a TOML file and returns its path.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "idem.toml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// loadFile loads the configuration of a TOML file body ("" = no file) and
// environ, without flags.
func loadFile(t *testing.T, body string, environ []string) (*ServeConfig, error) {
	t.Helper()
	path := ""
	if body != "" {
		path = writeConfig(t, body)
	}
	return loadConfig(path, environ, nil)
}

// wantConfigRefused fails unless the configuration of a TOML file body (""
// = no file) and the environment variable env ("" = none) is refused at
// start-up as a usage error naming want.
func wantConfigRefused(t *testing.T, body, env, want string) {
	t.Helper()
	var environ []string
	if env != "" {
		environ = []string{env}
	}
	_, err := loadFile(t, body, environ)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err %v, want one naming %q", err, want)
	}
	if code, _ := classify(err); code != ExitUsage {
		t.Fatalf("exit code %d, want %d", code, ExitUsage)
	}
}

// configRefusal is a configuration, a TOML file body and one environment
// variable ("" = none), that start-up must refuse naming want.
type configRefusal struct{ file, env, want string }

// checkConfigRefusals checks each case with wantConfigRefused, as a
// parallel subtest named by the key it wants named and the input.
func checkConfigRefusals(t *testing.T, cases []configRefusal) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.want+" "+tc.file+tc.env, func(t *testing.T) {
			t.Parallel()
			wantConfigRefused(t, tc.file, tc.env, tc.want)
		})
	}
}

// serveFlagSet is the flag set of `idem serve` parsed from args.
func serveFlagSet(t *testing.T, args ...string) *pflag.FlagSet {
	t.Helper()
	fs := newServeCmd().Flags()
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return fs
}

func TestConfigPrecedence(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, `
listen = "127.0.0.1:7001"
ops_listen = "127.0.0.1:7101"
[log]
level = "warn"
[jobs]
lease = 45
result_ttl = "2h"
[health]
dead_jobs = 7
`)
	env := []string{"IDEM_LISTEN=127.0.0.1:7002", "IDEM_LOG_LEVEL=debug", "IDEM_HEALTH_DEAD_JOBS=8", "IDEM_UNRELATED=x"}
	cases := []struct {
		name             string
		env              []string
		args             []string
		listen, ops, lvl string
		dead             int64
		lease, resultTTL time.Duration
	}{
		{"defaults", nil, nil, defaultListen, "", "info", idemhttp.DefaultHealthDeadJobs, 30 * time.Second, 7 * 24 * time.Hour},
		{"file over defaults", nil, []string{}, "127.0.0.1:7001", "127.0.0.1:7101", "warn", 7, 45 * time.Second, 2 * time.Hour},
		{"env over file", env, []string{}, "127.0.0.1:7002", "127.0.0.1:7101", "debug", 8, 45 * time.Second, 2 * time.Hour},
		{"flags over env", env, []string{"--listen", "127.0.0.1:7003", "--log-level", "error"}, "127.0.0.1:7003", "127.0.0.1:7101", "error", 8, 45 * time.Second, 2 * time.Hour},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := path
			if c.args == nil {
				p = ""
			}
			cfg, err := loadConfig(p, c.env, serveFlagSet(t, c.args...))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Listen != c.listen || cfg.OpsListen != c.ops || cfg.Log.Level != c.lvl || cfg.Health.DeadJobs != c.dead ||
				time.Duration(cfg.Jobs.Lease) != c.lease || time.Duration(cfg.Jobs.ResultTTL) != c.resultTTL {
				t.Fatalf("got listen %s ops %s level %s dead %d lease %v ttl %v", cfg.Listen, cfg.OpsListen, cfg.Log.Level,
					cfg.Health.DeadJobs, time.Duration(cfg.Jobs.Lease), time.Duration(cfg.Jobs.ResultTTL))
			}
		})
	}
}

func TestConfigRejectsUnknownKeysAndBadValues(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, file, env, want string }{
		{"unknown top-level key", "listn = \"x\"\n", "", "listn"},
		{"unknown nested key", "[health]\ndead_job = 3\n", "", "dead_job"},
		{"bad duration", "[jobs]\nlease = \"soon\"\n", "", "soon"},
		{"bad log level", "[log]\nlevel = \"loud\"\n", "", "loud"},
		{"bad rate", "[health]\nretry_rate = 2.0\n", "", "health.retry_rate"},
		{"bad env value", "", "IDEM_JOBS_MAX_ATTEMPTS=many", "max_attempts"},
		{"zero lease", "[jobs]\nlease = 0\n", "", "jobs.lease"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			wantConfigRefused(t, c.file, c.env, c.want)
		})
	}
}

// TestExampleConfigLoads: docs/idem.example.toml is valid, holds every
// key, and equals the defaults.
func TestExampleConfigLoads(t *testing.T) {
	t.Parallel()
	path := filepath.Join("..", "..", "docs", "idem.example.toml")
	fromFile, err := loadConfig(path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defaults, err := loadConfig("", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := printConfig(fromFile)
	b, _ := printConfig(defaults)
	if a != b {
		t.Fatalf("example differs from the defaults:\n%s\n---\n%s", a, b)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range configKeys() {
		leaf := key[strings.LastIndex(key, ".")+1:]
		if !strings.Contains(string(data), leaf+" =") {
			t.Fatalf("example lacks %s", key)
		}
	}
}

func TestPrintConfigMasksPassword(t *testing.T) {
	t.Parallel()
	out, errs, code := run(t, "serve", "--print-config", "--database", "postgres://idem:s3cret@db:5432/idem", "--shutdown-timeout", "12")
	if code != 0 {
		t.Fatalf("print-config: %d %s", code, errs)
	}
	if strings.Contains(out, "s3cret") || !strings.Contains(out, "postgres://idem:xxxxx@db:5432/idem") ||
		!strings.Contains(out, `shutdown_timeout = '12s'`) || !strings.Contains(out, "[health]") {
		t.Fatalf("print-config:\n%s", out)
	}
	// A password in the query string (pgx takes it) and a URL that does
	// not parse are hidden too.
	for _, db := range []string{
		"postgres://idem@db:5432/idem?sslmode=require&password=s3cret",
		"postgres://idem:s3cret%@db:5432/idem",
	} {
		out, errs, code := run(t, "serve", "--print-config", "--database", db)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", db, code, errs)
		}
		if strings.Contains(out, "s3cret") {
			t.Errorf("--print-config --database %q shows the password:\n%s", db, out)
		}
	}
	_, errs, code = run(t, "serve", "--config", writeConfig(t, "bogus = 1\n"))
	if code != ExitUsage || !strings.Contains(errs, "bogus") {
		t.Fatalf("unknown key: %d %s", code, errs)
	}
}

func TestPrintConfigJSON(t *testing.T) {
	t.Parallel()
	out, errs, code := run(t, "serve", "--print-config", "--json", "--database", "postgres://u:pw@h/db")
	var m map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &m) != nil || m["database"] != "postgres://u:xxxxx@h/db" || m["health"].(map[string]any)["dead_jobs"] != float64(100) {
		t.Fatalf("print-config --json: %d %q %q", code, out, errs)
	}
}

// TestPrintConfigJSONKeepsAChosenLogFormat: --json makes the log JSON
// unless the format was chosen: in the file, IDEM_LOG_FORMAT or
// --log-format.
func TestPrintConfigJSONKeepsAChosenLogFormat(t *testing.T) {
	logFormat := func(args ...string) any {
		t.Helper()
		out, errs, code := run(t, append([]string{"serve", "--print-config", "--json"}, args...)...)
		var m map[string]any
		if code != 0 || json.Unmarshal([]byte(out), &m) != nil {
			t.Fatalf("%v: exit %d: %q %q", args, code, out, errs)
		}
		return m["log"].(map[string]any)["format"]
	}
	if f := logFormat(); f != "json" {
		t.Errorf("--json alone: log.format %v, want json", f)
	}
	if f := logFormat("--config", writeConfig(t, "[log]\nformat = \"text\"\n")); f != "text" {
		t.Errorf("text in the file: log.format %v", f)
	}
	if f := logFormat("--log-format", "text"); f != "text" {
		t.Errorf("--log-format text: log.format %v", f)
	}
	t.Setenv("IDEM_LOG_FORMAT", "text")
	if f := logFormat(); f != "text" {
		t.Errorf("IDEM_LOG_FORMAT=text: log.format %v", f)
	}
}

// TestConfigDurationForms: a duration in the file, the environment or a
// map or list of durations reads as Go syntax, integer seconds (a TOML
// integer or a string) or fractional seconds (a TOML float).
func TestConfigDurationForms(t *testing.T) {
	t.Parallel()
	lease := func(c *ServeConfig) []Duration { return []Duration{c.Jobs.Lease} }
	cases := []struct {
		name, file string
		env        []string
		get        func(c *ServeConfig) []Duration
		want       []time.Duration
	}{
		{"Go syntax", "[jobs]\nlease = \"1m30s\"\n", nil, lease, []time.Duration{90 * time.Second}},
		{"integer seconds", "[jobs]\nlease = 45\n", nil, lease, []time.Duration{45 * time.Second}},
		{"seconds as a string, spaced", "[jobs]\nlease = \" 90 \"\n", nil, lease, []time.Duration{90 * time.Second}},
		{"fractional seconds", "[jobs]\nlease = 1.5\n", nil, lease, []time.Duration{1500 * time.Millisecond}},
		{"environment seconds", "", []string{"IDEM_JOBS_LEASE=120"}, lease, []time.Duration{2 * time.Minute}},
		{"map by kind", "[jobs.result_ttl_by_kind]\nreport = \"2h\"\nemail = 30\n", nil,
			func(c *ServeConfig) []Duration {
				return []Duration{c.Jobs.ResultTTLByKind["report"], c.Jobs.ResultTTLByKind["email"]}
			}, []time.Duration{2 * time.Hour, 30 * time.Second}},
		{"list of delays", "[retry]\ndelays = [\"1s\", 5, 0.25]\n", nil,
			func(c *ServeConfig) []Duration { return c.Retry.Delays },
			[]time.Duration{time.Second, 5 * time.Second, 250 * time.Millisecond}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := loadFile(t, c.file, c.env)
			if err != nil {
				t.Fatal(err)
			}
			got := c.get(cfg)
			if len(got) != len(c.want) {
				t.Fatalf("%v, want %v", got, c.want)
			}
			for i := range got {
				if time.Duration(got[i]) != c.want[i] {
					t.Fatalf("%v, want %v", got, c.want)
				}
			}
		})
	}
}
