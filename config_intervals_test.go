package idem_test

import (
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

// TestNewClientRefusesNonPositiveIntervals: a negative interval of a
// background service, or a leader term too short to renew, is refused by
// NewClient naming the field; it used to be accepted and then panic in
// the service's goroutine at Start (time.NewTicker of a non-positive
// interval), taking the whole process down.
func TestNewClientRefusesNonPositiveIntervals(t *testing.T) {
	t.Parallel()
	st := testStore(t)
	for _, tc := range []struct {
		field string
		cfg   idem.Config
	}{
		{"RescueInterval", idem.Config{RescueInterval: -time.Second}},
		{"MaintenanceInterval", idem.Config{MaintenanceInterval: -time.Second}},
		{"ScheduleInterval", idem.Config{ScheduleInterval: -time.Second}},
		{"PollInterval", idem.Config{PollInterval: -time.Second}},
		{"LeaderTTL", idem.Config{LeaderTTL: -time.Second}},
		{"LeaderTTL", idem.Config{LeaderTTL: 2 * time.Nanosecond}}, // renewed every TTL/3 = 0
	} {
		t.Run(tc.field, func(t *testing.T) {
			c := tc.cfg
			c.Logger = quietLogger()
			_, err := idem.NewClient(st, &c)
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("NewClient with %s set: err %v, want one naming %s", tc.field, err, tc.field)
			}
		})
	}
}
