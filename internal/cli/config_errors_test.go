package cli

import (
	"strings"
	"testing"
	"time"
)

// TestConfigErrorsNameTheKey: a bad configuration is reported in the
// user's terms — the TOML key as written (dotted, from the top), the file
// of an unknown key — never a Go field name (RetryRate, MaxBodyBytes) or
// the decoder's framing ("decoding failed", an empty name for the top level), once
// per mistake, with a hint saying where the keys are listed.
func TestConfigErrorsNameTheKey(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, file string
		want       []string
	}{
		{"unknown top-level key", "lisen = \"127.0.0.1:1\"\n", []string{`unknown key "lisen"`, "idem.toml"}},
		{"unknown nested key", "[jobs]\nleese = \"30s\"\n", []string{`unknown key "jobs.leese"`}},
		{"unknown section", "[jobz]\nlease = \"30s\"\n", []string{`unknown key "jobz"`}},
		{"two unknown keys", "[retry]\nbsae = \"1s\"\nfactr = 2\n", []string{`unknown key "retry.bsae"`, `unknown key "retry.factr"`}},
		{"unknown key in a per-queue policy", "[retry_by_queue.emails]\nbsae = \"1s\"\n", []string{`unknown key "retry_by_queue.emails.bsae"`}},
		{"fraction", "[jobs]\nmax_attempts = 2.7\n", []string{"jobs.max_attempts", "2.7", "not a whole number"}},
		{"rate above 1", "[health]\nretry_rate = 2.0\n", []string{"health.retry_rate", "between 0 and 1"}},
		{"hit rate above 1", "[health]\nhit_rate = 1.5\n", []string{"health.hit_rate", "between 0 and 1"}},
		{"negative body limit", "[http]\nmax_body_bytes = -5\n", []string{"http.max_body_bytes -5: want 1 or more"}},
		{"bad origin", "[http]\ncors_origins = [\"example.com\"]\n", []string{`http.cors_origins "example.com"`}},
		{"number for a table", "[limits]\nqueues = 3\n", []string{"limits.queues", "wants a table", "got a number"}},
		{"text for a table", "[jobs]\nresult_ttl_by_kind = \"1h\"\n", []string{"jobs.result_ttl_by_kind", "wants a table", "got text"}},
		{"table for a list", "[http]\ncors_origins = {a = 1}\n", []string{"http.cors_origins[0]", "wants text", "got a table"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := loadFile(t, c.file, nil)
			if err == nil {
				t.Fatal("loaded")
			}
			msg := err.Error()
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
			for _, bad := range []string{"decoding failed", "''", "invalid keys", "RetryRate", "HitRate", "MaxBodyBytes", "idemhttp config",
				"unconvertible", "map[string]", "interface {}"} {
				if strings.Contains(msg, bad) {
					t.Errorf("error %q contains %q", msg, bad)
				}
			}
			code, hint := classify(err)
			if code != ExitUsage {
				t.Errorf("exit code %d, want %d", code, ExitUsage)
			}
			if !strings.Contains(hint, "docs/idem.example.toml") {
				t.Errorf("hint %q: want it to point at docs/idem.example.toml", hint)
			}
		})
	}
}

// TestConfigRefusesMisspeltEnvironment: a variable in the namespace of a
// configuration section (IDEM_JOBS_…, IDEM_HEALTH_…) that names no key is
// refused naming it, as an unknown key of the file is — it was ignored, so
// IDEM_JOBS_LEESE=5m ran with the default lease. Variables outside the
// sections (IDEM_API_KEY, IDEM_URL, IDEM_PG_SCHEMA, a test's own) are not
// the server's to judge and stay allowed.
func TestConfigRefusesMisspeltEnvironment(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ env, want string }{
		{"IDEM_JOBS_LEESE=5m", "IDEM_JOBS_LEESE"},
		{"IDEM_HEALTH_DEADJOBS=3", "IDEM_HEALTH_DEADJOBS"},
		{"IDEM_LOG_LEVL=debug", "IDEM_LOG_LEVL"},
		{"IDEM_RETRY_BY_QUEUE_EMAILS_BASE=1s", "IDEM_RETRY_BY_QUEUE_EMAILS_BASE"},
	} {
		_, err := loadFile(t, "", []string{c.env})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want one naming %s", c.env, err, c.want)
			continue
		}
		if code, _ := classify(err); code != ExitUsage {
			t.Errorf("%s: exit code %d, want %d", c.env, code, ExitUsage)
		}
	}
	env := []string{"IDEM_API_KEY=idem_x", "IDEM_URL=http://127.0.0.1:1", "IDEM_PG_SCHEMA=s", "IDEM_TENANT=t",
		"IDEM_CONFIG=", "IDEM_DELIVER_QUEUES=a", "IDEM_TEST_DATABASE_URL=postgres://x", "IDEM_JOBS_LEASE=45s", "IDEM_LOG_LEVEL="}
	cfg, err := loadFile(t, "", env)
	if err != nil {
		t.Fatalf("known and unrelated variables: %v", err)
	}
	if got := time.Duration(cfg.Jobs.Lease); got != 45*time.Second {
		t.Fatalf("jobs.lease %s, want 45s", got)
	}
}

// TestConfigErrorsNameTheSource: a bad value that came from the
// environment or a flag names the variable or flag as well as the key, so
// a user whose file is right finds the value to fix.
func TestConfigErrorsNameTheSource(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env   []string
		flags []string
		want  string
	}{
		{env: []string{"IDEM_JOBS_LEASE=abc"}, want: `jobs.lease (IDEM_JOBS_LEASE) "abc" is not a duration`},
		{env: []string{"IDEM_JOBS_MAX_ATTEMPTS=0"}, want: "jobs.max_attempts (IDEM_JOBS_MAX_ATTEMPTS) 0: want 1 to"},
		{env: []string{"IDEM_HEALTH_RETRY_RATE=3"}, want: "health.retry_rate (IDEM_HEALTH_RETRY_RATE) 3: want a share"},
		{flags: []string{"--listen", "8080"}, want: `listen (--listen) "8080": want host:port`},
		{env: []string{"IDEM_LISTEN=8080"}, flags: []string{"--listen", "9090"}, want: `listen (--listen) "9090"`},
	} {
		_, err := loadConfig("", c.env, serveFlagSet(t, c.flags...))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %v: err %v, want one containing %q", c.env, c.flags, err, c.want)
		}
	}
}
