package idem_test

import (
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

// TestScheduleLongIdleCatchUpOneJob: schedules firing every minute, with
// no scheduler for two years (over a million firings), make one job each,
// for the newest firing, on the first pass, and none on the next: catch_up
// runs one job for all the missed firings, skip runs the newest one (30 s
// old, in the grace). The scan of the missed firings used to stop at a
// million, so the first pass made a job for a firing of 2028-10 under
// catch_up and none under skip.
func TestScheduleLongIdleCatchUpOneJob(t *testing.T) {
	t.Parallel()
	for _, sk := range storeKinds() {
		t.Run(sk.name, func(t *testing.T) {
			t.Parallel()
			st, _ := sk.open(t)
			clock := &fakeClock{now: schedDay}
			c := schedClient(t, st, clock)
			putSchedule(t, c, idem.Schedule{Name: "catcher", Cron: "* * * * *", Kind: "k", Missed: idem.MissedCatchUp})
			putSchedule(t, c, idem.Schedule{Name: "skipper", Cron: "* * * * *", Kind: "k"})
			idle := 2 * 366 * 24 * time.Hour
			clock.Add(idle + 30*time.Second)
			newest := schedDay.Add(idle).Format("2006-01-02T15:04")
			want := map[string]int{
				idem.ScheduleKeyPrefix + "catcher:default:" + newest: 1,
				idem.ScheduleKeyPrefix + "skipper:default:" + newest: 1,
			}
			for range 2 {
				runSchedulers(t, []*idem.Client{c})
				compareKeys(t, firingKeys(t, c), want)
			}
		})
	}
}
