package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

// dottedConfig keys its maps by a queue and kinds whose names hold dots.
const dottedConfig = `
[jobs.result_ttl_by_kind]
"orders.paid" = "2h"

[retry_by_queue."emails.v2"]
base = "3s"
max = "1m"

[retry_by_kind."orders.paid"]
delays = ["1s", "5s"]
`

// TestConfigMapsKeyedByDottedNames: queue and kind names hold dots
// ("emails.v2", "orders.paid"); keyed by them, the maps of the file
// (retry_by_queue, retry_by_kind, result_ttl_by_kind) reach the runtime
// under those names and round-trip through --print-config. The dot was
// koanf's key delimiter, which split such a name into nested keys.
func TestConfigMapsKeyedByDottedNames(t *testing.T) {
	t.Parallel()
	check := func(what string, cfg *ServeConfig) {
		t.Helper()
		c := cfg.clientConfig(&idem.Config{})
		if got := c.ResultTTLByKind["orders.paid"]; got != 2*time.Hour || len(c.ResultTTLByKind) != 1 {
			t.Errorf("%s: result_ttl_by_kind %v, want orders.paid = 2h", what, c.ResultTTLByKind)
		}
		if p, ok := c.RetryByQueue["emails.v2"]; !ok || p.Base != 3*time.Second || p.Max != time.Minute || len(c.RetryByQueue) != 1 {
			t.Errorf("%s: retry_by_queue %+v, want emails.v2 with base 3s, max 1m", what, c.RetryByQueue)
		}
		if p, ok := c.RetryByKind["orders.paid"]; !ok || len(p.Delays) != 2 || p.Delays[1] != 5*time.Second || len(c.RetryByKind) != 1 {
			t.Errorf("%s: retry_by_kind %+v, want orders.paid with delays 1s, 5s", what, c.RetryByKind)
		}
	}
	cfg, err := loadFile(t, dottedConfig, nil)
	if err != nil {
		t.Fatal(err)
	}
	check("the file", cfg)

	out, errs, code := run(t, "serve", "--print-config", "--config", writeConfig(t, dottedConfig))
	if code != 0 {
		t.Fatalf("print-config: %d %s", code, errs)
	}
	for _, want := range []string{"orders.paid", "emails.v2"} {
		if !strings.Contains(out, want) {
			t.Errorf("print-config does not name %s:\n%s", want, out)
		}
	}
	again, err := loadFile(t, out, nil)
	if err != nil {
		t.Fatalf("the printed configuration does not load: %v\n%s", err, out)
	}
	check("the printed configuration", again)
}
