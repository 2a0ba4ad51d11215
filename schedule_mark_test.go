package idem_test

import (
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

// TestScheduleStaleLeaderDoesNotFireBehindMark: a scheduler pass that read
// a schedule, then stalled (a leader paused, its leadership lost) while
// another scheduler fired a later slot, does not fire the slot it computed
// from its read: that slot is at or before the schedule's mark, so the
// store refuses it (no job, no error), and the pass reports nothing fired.
func TestScheduleStaleLeaderDoesNotFireBehindMark(t *testing.T) {
	t.Parallel()
	for _, sk := range storeKinds() {
		t.Run(sk.name, func(t *testing.T) {
			t.Parallel()
			raw, _ := sk.open(t)
			st := &changeAfterRead{Store: raw}
			staleClock := &fakeClock{now: schedDay}
			newClock := &fakeClock{now: schedDay}
			stale := schedClient(t, st, staleClock)
			leader := schedClient(t, raw, newClock)
			putSchedule(t, leader, idem.Schedule{Name: "tick", Every: 10 * time.Minute, Kind: "tick"})

			staleClock.Add(10 * time.Minute) // the stale pass computes 00:10
			newClock.Add(20 * time.Minute)   // the new leader, later, fires 00:20 (00:10 is missed)
			st.arm(func() {
				if n, err := idem.RunSchedulerOnce(leader); err != nil || n != 1 {
					t.Errorf("new leader's pass: %d fired (%v), want 1", n, err)
				}
			})
			if n, err := idem.RunSchedulerOnce(stale); err != nil || n != 0 {
				t.Errorf("stale pass: %d fired (%v), want 0", n, err)
			}
			compareKeys(t, firingKeys(t, leader), map[string]int{idem.ScheduleKeyPrefix + "tick:default:2026-11-26T00:20": 1})
			info, err := leader.ScheduleGet(t.Context(), "", "tick")
			if err != nil {
				t.Fatal(err)
			}
			if info.LastFiredAt == nil || !info.LastFiredAt.Equal(schedDay.Add(20*time.Minute)) {
				t.Errorf("last fired %v, want 00:20", info.LastFiredAt)
			}
			// A manual trigger is not held by the mark.
			if _, err := stale.ScheduleTrigger(t.Context(), "", "tick", nil); err != nil {
				t.Errorf("trigger after the mark: %v", err)
			}
		})
	}
}

// TestScheduleUnchangedPutDuringPassFires: a put of a schedule's unchanged
// definition while a pass is under way (every node's Start puts
// Config.Schedules) does not hold the pass's firing back to the next pass.
func TestScheduleUnchangedPutDuringPassFires(t *testing.T) {
	t.Parallel()
	for _, sk := range storeKinds() {
		t.Run(sk.name, func(t *testing.T) {
			t.Parallel()
			raw, _ := sk.open(t)
			st := &changeAfterRead{Store: raw}
			clock := &fakeClock{now: schedDay}
			c := schedClient(t, st, clock)
			other := schedClient(t, raw, clock)
			tick := idem.Schedule{Name: "tick", Every: 10 * time.Minute, Kind: "tick", Args: []byte(`{"v": 1}`)}
			putSchedule(t, c, tick)
			clock.Add(10 * time.Minute)
			same := tick
			same.Args = []byte(`{"v":1}`) // the same args, written otherwise
			st.arm(func() { putSchedule(t, other, same) })
			if n, err := idem.RunSchedulerOnce(c); err != nil || n != 1 {
				t.Errorf("pass during an unchanged put: %d fired (%v), want 1", n, err)
			}
			wantJobArgs(t, c, idem.ScheduleKeyPrefix+"tick:default:2026-11-26T00:10", `{"v":1}`)
		})
	}
}
