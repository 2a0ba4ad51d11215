package idem_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

// TestNewClientRefusesLeaderTTLNotUnderScheduleGrace: a leader term as
// long as the schedule grace or longer is refused (naming both fields,
// wrapping ErrInvalid) while the node runs maintenance, since a failover
// then outlasts the grace and the skip policy misses the firings due
// during it; it used to be accepted.
func TestNewClientRefusesLeaderTTLNotUnderScheduleGrace(t *testing.T) {
	t.Parallel()
	st := testStore(t)
	for _, tc := range []struct {
		name string
		cfg  idem.Config
		ok   bool
	}{
		{"defaults", idem.Config{}, true},
		{"ttl equal to the grace", idem.Config{LeaderTTL: time.Minute, ScheduleGrace: time.Minute}, false},
		{"ttl over the default grace", idem.Config{LeaderTTL: 2 * time.Minute}, false},
		{"ttl over the grace", idem.Config{LeaderTTL: 30 * time.Second, ScheduleGrace: 20 * time.Second}, false},
		{"ttl under the grace", idem.Config{LeaderTTL: 59 * time.Second}, true},
		{"with schedules", idem.Config{LeaderTTL: time.Hour, ScheduleGrace: time.Hour,
			Schedules: []idem.Schedule{{Name: "s", Every: time.Hour, Kind: "k"}}}, false},
		{"no maintenance, no leader", idem.Config{LeaderTTL: time.Hour, DisableMaintenance: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.cfg
			c.Logger = quietLogger()
			_, err := idem.NewClient(st, &c)
			if tc.ok {
				if err != nil {
					t.Fatalf("NewClient: %v", err)
				}
				return
			}
			var ie *idem.InvalidError
			if err == nil || !errors.Is(err, idem.ErrInvalid) || !errors.As(err, &ie) ||
				!strings.Contains(err.Error(), "LeaderTTL") || !strings.Contains(err.Error(), "ScheduleGrace") {
				t.Fatalf("NewClient: err %v, want an *InvalidError (ErrInvalid) naming LeaderTTL and ScheduleGrace", err)
			}
		})
	}
}

// TestNewClientRefusesNegativeScheduleGrace: a negative grace is refused
// as such (it was reported as a LeaderTTL not under it).
func TestNewClientRefusesNegativeScheduleGrace(t *testing.T) {
	t.Parallel()
	_, err := idem.NewClient(testStore(t), &idem.Config{Logger: quietLogger(), ScheduleGrace: -time.Second})
	if err == nil || !strings.Contains(err.Error(), "negative ScheduleGrace") {
		t.Fatalf("NewClient: err %v, want one about a negative ScheduleGrace", err)
	}
}
