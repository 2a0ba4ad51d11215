package idem_test

import (
	"context"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store"
)

// pauseStore moves the clock on once the schedule named after has fired:
// the node was paused (GC, a VM stall) in the middle of a scheduler pass.
type pauseStore struct {
	store.Store
	clock *fakeClock
	after string
	pause time.Duration
}

func (s *pauseStore) ScheduleFire(ctx context.Context, p *store.ScheduleFireParams) (*store.ScheduleFireResult, error) {
	res, err := s.Store.ScheduleFire(ctx, p)
	if p.Read != nil && p.Read.Name == s.after && p.Job != nil {
		s.clock.Add(s.pause)
	}
	return res, err
}

// TestSchedulePauseDuringPassMissesLateFiring: a node paused for longer
// than ScheduleGrace after the pass's first firing does not run the next
// schedule's firing late under skip: it is judged on the clock when it is
// fired, found older than the grace and missed (marked, no job). The pass
// used to read the clock once and fire it 2 minutes late.
func TestSchedulePauseDuringPassMissesLateFiring(t *testing.T) {
	t.Parallel()
	for _, sk := range storeKinds() {
		t.Run(sk.name, func(t *testing.T) {
			t.Parallel()
			st, _ := sk.open(t)
			clock := &fakeClock{now: schedDay}
			c := schedClient(t, &pauseStore{Store: st, clock: clock, after: "a-first", pause: 2 * time.Minute}, clock)
			putSchedule(t, c, idem.Schedule{Name: "a-first", Cron: "0 * * * *", Kind: "k"})
			putSchedule(t, c, idem.Schedule{Name: "b-second", Cron: "0 * * * *", Kind: "k"})
			clock.Add(time.Hour + 10*time.Second)
			runSchedulers(t, []*idem.Client{c})
			compareKeys(t, firingKeys(t, c), map[string]int{idem.ScheduleKeyPrefix + "a-first:default:2026-11-26T01:00": 1})
			b, err := c.ScheduleGet(t.Context(), "", "b-second")
			if err != nil {
				t.Fatal(err)
			}
			if b.LastFiredAt == nil || !b.LastFiredAt.Equal(schedDay.Add(time.Hour)) || b.LastJobID != 0 {
				t.Errorf("b-second: last fired %v job %d, want 01:00 missed (no job)", b.LastFiredAt, b.LastJobID)
			}
		})
	}
}
