package maintenance_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/idem-dev/idem/internal/maintenance"
)

// TestPlanNextAcrossPartHourChanges: where a daylight-saving change is not
// a whole hour of wall-clock time from where robfig/cron's search lands
// (Lord Howe's 30 minutes; Chatham's change at :45), a cron expression
// fires at its wall-clock times and only there. robfig/cron v3.0.1,
// searching in the zone itself, skipped days and fired at times the
// expression does not name: a daily 00:00 in Lord Howe made no job on
// 6 April, 03:00 none on 5 April, 01:30 a second job at 02:30 on
// 4 October, and 02:45 in Chatham fired at 03:45 on the day its 02:45 does
// not exist.
func TestPlanNextAcrossPartHourChanges(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cron, zone string
		from       time.Time // UTC
		want       []string  // the next firings, local "01-02 15:04 -0700"
	}{
		// Lord Howe, 2026-04-05: 02:00 +11 becomes 01:30 +10:30.
		{"0 0 * * *", "Australia/Lord_Howe", time.Date(2026, 4, 3, 12, 0, 0, 0, time.UTC),
			[]string{"04-04 00:00 +1100", "04-05 00:00 +1100", "04-06 00:00 +1030", "04-07 00:00 +1030"}},
		{"0 3 * * *", "Australia/Lord_Howe", time.Date(2026, 4, 3, 12, 0, 0, 0, time.UTC),
			[]string{"04-04 03:00 +1100", "04-05 03:00 +1030", "04-06 03:00 +1030"}},
		// 02:00 +10:30 comes once, after the repeated 01:30–02:00.
		{"0 2 * * *", "Australia/Lord_Howe", time.Date(2026, 4, 3, 12, 0, 0, 0, time.UTC),
			[]string{"04-04 02:00 +1100", "04-05 02:00 +1030", "04-06 02:00 +1030"}},
		// Lord Howe, 2026-10-04: 02:00 +10:30 becomes 02:30 +11.
		{"30 1 * * *", "Australia/Lord_Howe", time.Date(2026, 10, 3, 0, 0, 0, 0, time.UTC),
			[]string{"10-04 01:30 +1030", "10-05 01:30 +1100"}},
		{"45 1 * * *", "Australia/Lord_Howe", time.Date(2026, 10, 3, 0, 0, 0, 0, time.UTC),
			[]string{"10-04 01:45 +1030", "10-05 01:45 +1100"}},
		// Chatham, 2026-09-27: 02:45 +12:45 becomes 03:45 +13:45.
		{"45 2 * * *", "Pacific/Chatham", time.Date(2026, 9, 25, 0, 0, 0, 0, time.UTC),
			[]string{"09-26 02:45 +1245", "09-28 02:45 +1345"}},
	} {
		p := compile(t, maintenance.Timing{Cron: tc.cron, Timezone: tc.zone})
		f := tc.from
		var got []string
		for range tc.want {
			f = p.Next(f)
			got = append(got, f.In(p.Location()).Format("01-02 15:04 -0700"))
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%q in %s from %v: %v, want %v", tc.cron, tc.zone, tc.from, got, tc.want)
		}
	}
}

// TestPlanNextMatchesWallClock checks Next against the definition, around
// every UTC-offset change of 2026 and 2027 of zones with hour, part-hour
// and midnight changes: the firings are exactly the instants whose
// wall-clock time in the zone the expression names (both instants of a
// repeated time; none for a time a change skips).
func TestPlanNextMatchesWallClock(t *testing.T) {
	t.Parallel()
	zones := []string{"Europe/Berlin", "America/New_York", "America/Santiago", "America/Havana", "Asia/Beirut",
		"Australia/Lord_Howe", "Pacific/Chatham", "Atlantic/Azores", "Antarctica/Troll", "America/Asuncion", "Africa/Casablanca"}
	crons := []string{"0 * * * *", "*/15 * * * *", "*/7 * * * *", "0 */2 * * *", "0 0 * * *", "30 0 * * *", "0 1 * * *",
		"30 1 * * *", "45 1 * * *", "0 2 * * *", "15 2 * * *", "30 2 * * *", "45 2 * * *", "0 3 * * *", "45 3 * * *",
		"59 23 * * *", "0 0 * * 0"}
	parser := cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)
	for _, zone := range zones {
		loc, err := time.LoadLocation(zone)
		if err != nil {
			t.Fatal(err)
		}
		var changes []time.Time
		for at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC); at.Year() < 2028; {
			_, end := at.In(loc).ZoneBounds()
			if end.IsZero() {
				break
			}
			changes, at = append(changes, end), end
		}
		for _, expr := range crons {
			p := compile(t, maintenance.Timing{Cron: expr, Timezone: zone})
			sched, err := parser.Parse(expr)
			if err != nil {
				t.Fatal(err)
			}
			spec := sched.(*cron.SpecSchedule)
			for _, change := range changes {
				from, to := change.Add(-26*time.Hour).Truncate(time.Hour), change.Add(26*time.Hour)
				var want, got []string
				for m := from.Add(time.Minute); m.Before(to); m = m.Add(time.Minute) {
					if wallMatches(spec, m.In(loc)) {
						want = append(want, m.In(loc).Format(time.RFC3339))
					}
				}
				for f := p.Next(from); !f.IsZero() && f.Before(to); {
					got = append(got, f.In(loc).Format(time.RFC3339))
					n := p.Next(f)
					if !n.IsZero() && !n.After(f) {
						t.Errorf("%q in %s: Next(%v) = %v, not after it", expr, zone, f.In(loc), n.In(loc))
						break
					}
					f = n
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("%q in %s around %v:\n got %v\nwant %v", expr, zone, change.In(loc), got, want)
				}
			}
		}
	}
}

// wallMatches reports whether the wall-clock time l (whole minutes) is one
// that spec names, by robfig/cron's rules (day of month and day of week
// both restrict when neither is '*', else either matches).
func wallMatches(spec *cron.SpecSchedule, l time.Time) bool {
	const star = 1 << 63
	bit := func(set uint64, v int) bool { return set&(1<<uint(v)) != 0 }
	dom, dow := bit(spec.Dom, l.Day()), bit(spec.Dow, int(l.Weekday()))
	day := dom || dow
	if spec.Dom&star != 0 || spec.Dow&star != 0 {
		day = dom && dow
	}
	return bit(spec.Minute, l.Minute()) && bit(spec.Hour, l.Hour()) && bit(spec.Month, int(l.Month())) && day
}

// TestPlanNextAcrossLeapYearEnds: a daily firing in zones whose offset
// changes by a rule (their TZ string, past the zone's explicit
// transitions, which end in 2037) goes on every day from 2036 to 2060.
// Go 1.26's ZoneBounds gives, for the last day of such a leap year (2040
// in Europe/Berlin), a stretch that ends at that day's 00:00 UTC, at or
// before the instant asked about: Next followed those ends and gave up
// (zero, so the schedule never fired again) on 31 December 2040, 2044,
// 2048, ….
func TestPlanNextAcrossLeapYearEnds(t *testing.T) {
	t.Parallel()
	for _, zone := range []string{"Europe/Berlin", "America/New_York", "Australia/Sydney", "Pacific/Chatham"} {
		p := compile(t, maintenance.Timing{Cron: "0 9 * * *", Timezone: zone})
		loc := p.Location()
		f := p.Next(time.Date(2036, 1, 1, 0, 0, 0, 0, time.UTC))
		for f.Year() < 2060 {
			n := p.Next(f)
			if n.IsZero() {
				t.Fatalf("%s: no firing after %v", zone, f.In(loc))
			}
			if d := n.Sub(f); d < 23*time.Hour || d > 25*time.Hour || n.In(loc).Hour() != 9 {
				t.Fatalf("%s: the firing after %v is %v", zone, f.In(loc), n.In(loc))
			}
			f = n
		}
		if r := p.Repeat(time.Date(2040, 12, 31, 8, 0, 0, 0, time.UTC)); !r.IsZero() {
			t.Errorf("%s: Repeat of a firing on 31 December 2040: %v, want none", zone, r)
		}
	}
}
