package idem_test

import (
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/key"
)

// TestScheduleFallBackRepeatOneJob: in the repeated autumn hour a
// wall-clock time occurs twice; its two firings share one key and make one
// job (docs/schedules.md, "one job per local time"), also with the shortest
// dedup window a schedule accepts, which is no longer than the repeat.
func TestScheduleFallBackRepeatOneJob(t *testing.T) {
	t.Parallel()
	hour := idem.MinScheduleDedupWindow
	for _, tc := range []struct {
		name string
		s    idem.Schedule
		// the two instants of the repeated wall-clock time
		first, second time.Time
		want          string
	}{
		{"berlin-daily-0230", idem.Schedule{Name: "daily", Cron: "30 2 * * *", Timezone: "Europe/Berlin", Kind: "k", DedupWindow: &hour},
			time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC), time.Date(2026, 10, 25, 1, 30, 0, 0, time.UTC),
			idem.ScheduleKeyPrefix + "daily:default:2026-10-25T02:30"},
		{"newyork-daily-0130", idem.Schedule{Name: "daily", Cron: "30 1 * * *", Timezone: "America/New_York", Kind: "k", DedupWindow: &hour},
			time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC), time.Date(2026, 11, 1, 6, 30, 0, 0, time.UTC),
			idem.ScheduleKeyPrefix + "daily:default:2026-11-01T01:30"},
		{"berlin-hourly-hour-grain", idem.Schedule{Name: "hourly", Cron: "0 * * * *", Timezone: "Europe/Berlin", Grain: key.GrainHour, Kind: "k", DedupWindow: &hour},
			time.Date(2026, 10, 25, 0, 0, 0, 0, time.UTC), time.Date(2026, 10, 25, 1, 0, 0, 0, time.UTC),
			idem.ScheduleKeyPrefix + "hourly:default:2026-10-25T02"},
		{"berlin-daily-default-window", idem.Schedule{Name: "daily", Cron: "30 2 * * *", Timezone: "Europe/Berlin", Kind: "k"},
			time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC), time.Date(2026, 10, 25, 1, 30, 0, 0, time.UTC),
			idem.ScheduleKeyPrefix + "daily:default:2026-10-25T02:30"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, sk := range storeKinds() {
				t.Run(sk.name, func(t *testing.T) {
					t.Parallel()
					st, _ := sk.open(t)
					clock := &fakeClock{now: tc.first.Add(-90 * time.Second)}
					c := schedClient(t, st, clock)
					putSchedule(t, c, tc.s)
					// The scheduler passes a second after each instant of
					// the repeated time.
					for _, at := range []time.Time{tc.first, tc.second} {
						clock.mu.Lock()
						clock.now = at.Add(time.Second)
						clock.mu.Unlock()
						runSchedulers(t, []*idem.Client{c})
					}
					got := firingKeys(t, c)
					if got[tc.want] != 1 || len(got) != 1 {
						t.Fatalf("the repeated %s made the jobs %v, want one %s", tc.s.Timezone, got, tc.want)
					}
				})
			}
		})
	}
}

// TestSchedulePartHourChangesOneJobPerDay: daily schedules in zones whose
// daylight-saving change is not a whole hour from robfig/cron's search
// (Chatham changes at 03:45 → 02:45; Lord Howe by 30 minutes) make one job
// a day, keyed by their own wall-clock time, through the change and the
// days after it. Before, a daily 03:45 in Chatham fired at the change's
// instant under the key of 02:45 and then never again (the next firing of
// that instant was itself: the scheduler stayed on it, scanning a million
// firings every pass), and a daily 00:00 in Lord Howe made no job on the
// day after the change.
func TestSchedulePartHourChangesOneJobPerDay(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, cron, zone string
		from             time.Time // UTC; the scheduler passes every 5 minutes for three days
		want             []string  // the keys' grain dates
	}{
		{"chatham-0345", "45 3 * * *", "Pacific/Chatham", time.Date(2026, 4, 3, 12, 0, 0, 0, time.UTC),
			[]string{"2026-04-04T03:45", "2026-04-05T03:45", "2026-04-06T03:45"}},
		{"lordhowe-0000", "0 0 * * *", "Australia/Lord_Howe", time.Date(2026, 4, 3, 12, 0, 0, 0, time.UTC),
			[]string{"2026-04-04T00:00", "2026-04-05T00:00", "2026-04-06T00:00"}},
		{"lordhowe-0130", "30 1 * * *", "Australia/Lord_Howe", time.Date(2026, 10, 2, 12, 0, 0, 0, time.UTC),
			[]string{"2026-10-03T01:30", "2026-10-04T01:30", "2026-10-05T01:30"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, sk := range storeKinds() {
				t.Run(sk.name, func(t *testing.T) {
					t.Parallel()
					st, _ := sk.open(t)
					clock := &fakeClock{now: tc.from}
					c := schedClient(t, st, clock)
					putSchedule(t, c, idem.Schedule{Name: "daily", Cron: tc.cron, Timezone: tc.zone, Kind: "k"})
					for range 3 * 24 * 12 {
						clock.Add(5 * time.Minute)
						runSchedulers(t, []*idem.Client{c})
					}
					want := map[string]int{}
					for _, d := range tc.want {
						want[idem.ScheduleKeyPrefix+"daily:default:"+d] = 1
					}
					compareKeys(t, firingKeys(t, c), want)
				})
			}
		})
	}
}
