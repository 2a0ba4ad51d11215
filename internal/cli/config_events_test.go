package cli

import (
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

// TestConfigEventRetention: how long the topics' event log keeps events
// (seed 003's 90-day replay look-back) is a setting of `idem serve` like
// the other retentions: the default is 90 days, a file or IDEM_* sets
// another, and 0 keeps events forever.
func TestConfigEventRetention(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, file string
		env        []string
		want       time.Duration // negative: kept forever
	}{
		{"default", "", nil, idem.DefaultEventRetention},
		{"file", "[retention]\nevents = \"720h\"\n", nil, 720 * time.Hour},
		{"environment", "", []string{"IDEM_RETENTION_EVENTS=48h"}, 48 * time.Hour},
		{"zero keeps them", "[retention]\nevents = 0\n", nil, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := ""
			if tc.file != "" {
				path = writeConfig(t, tc.file)
			}
			cfg, err := loadConfig(path, tc.env, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := cfg.clientConfig(&idem.Config{}).EventRetention
			if (tc.want < 0 && got >= 0) || (tc.want >= 0 && got != tc.want) {
				t.Fatalf("EventRetention %v, want %v", got, tc.want)
			}
		})
	}
}
