package maintenance_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/maintenance"
	"github.com/idem-dev/idem/key"
	"github.com/idem-dev/idem/store"
)

func compile(t *testing.T, tm maintenance.Timing) *maintenance.Plan {
	t.Helper()
	p, err := maintenance.Compile(tm)
	if err != nil {
		t.Fatalf("compile %+v: %v", tm, err)
	}
	return p
}

func TestCompileRefusesBadTimings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		t     maintenance.Timing
		field string
	}{
		{"nothing", maintenance.Timing{}, "cron"},
		{"both", maintenance.Timing{Cron: "* * * * *", Every: time.Hour}, "cron"},
		{"bad cron", maintenance.Timing{Cron: "61 * * * *"}, "cron"},
		{"too few fields", maintenance.Timing{Cron: "* * *"}, "cron"},
		{"zone inside cron", maintenance.Timing{Cron: "TZ=Europe/Paris 0 3 * * *"}, "cron"},
		{"interval as cron", maintenance.Timing{Cron: "@every 5m"}, "cron"},
		{"every under a minute", maintenance.Timing{Every: 30 * time.Second}, "every"},
		{"negative every", maintenance.Timing{Every: -time.Hour}, "every"},
		{"fractional seconds", maintenance.Timing{Every: time.Minute + time.Millisecond}, "every"},
		{"unknown zone", maintenance.Timing{Every: time.Hour, Timezone: "Mars/Olympus"}, "timezone"},
		{"local zone", maintenance.Timing{Every: time.Hour, Timezone: "Local"}, "timezone"},
		{"unknown grain", maintenance.Timing{Every: time.Hour, Grain: "week"}, "grain"},
		{"unknown missed policy", maintenance.Timing{Every: time.Hour, Missed: "run_all"}, "missed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := maintenance.Compile(tc.t)
			var ie *idemtype.InvalidError
			if !errors.As(err, &ie) || ie.Field != tc.field {
				t.Fatalf("error %v, want an invalid %s", err, tc.field)
			}
		})
	}
}

func TestCompileDefaults(t *testing.T) {
	t.Parallel()
	p := compile(t, maintenance.Timing{Cron: "0 3 * * *"})
	if p.Missed() != maintenance.MissedSkip || p.Location() != time.UTC {
		t.Errorf("defaults: missed %q zone %v", p.Missed(), p.Location())
	}
	for _, c := range []string{"*/5 * * * *", "30 0 3 * * *", "@daily", "@hourly", "0 9 * * MON-FRI"} {
		if _, err := maintenance.Compile(maintenance.Timing{Cron: c}); err != nil {
			t.Errorf("cron %q: %v", c, err)
		}
	}
	p = compile(t, maintenance.Timing{Every: time.Hour, Timezone: "Asia/Tokyo", Missed: maintenance.MissedCatchUp})
	if p.Missed() != maintenance.MissedCatchUp || p.Location().String() != "Asia/Tokyo" {
		t.Errorf("missed %q zone %v", p.Missed(), p.Location())
	}
}

func TestPlanNext(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 28, 22, 30, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		t    maintenance.Timing
		from time.Time
		want time.Time
	}{
		{"cron in UTC", maintenance.Timing{Cron: "0 3 * * *"}, at, time.Date(2026, 3, 29, 3, 0, 0, 0, time.UTC)},
		// 03:00 in Paris on the day summer time starts is 01:00 UTC.
		{"cron in a zone", maintenance.Timing{Cron: "0 3 * * *", Timezone: "Europe/Paris"}, at, time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC)},
		{"strictly after", maintenance.Timing{Cron: "30 22 * * *"}, at, time.Date(2026, 3, 29, 22, 30, 0, 0, time.UTC)},
		{"seconds field", maintenance.Timing{Cron: "15 * * * * *"}, at, at.Add(15 * time.Second)},
		{"every 5 min on the UTC clock", maintenance.Timing{Every: 5 * time.Minute}, at.Add(time.Minute), at.Add(5 * time.Minute)},
		{"every on a boundary moves on", maintenance.Timing{Every: time.Hour}, at.Add(30 * time.Minute), at.Add(90 * time.Minute)},
		{"a zone does not shift an interval", maintenance.Timing{Every: time.Hour, Timezone: "Asia/Kolkata"}, at, at.Add(30 * time.Minute)},
		{"a date that never comes", maintenance.Timing{Cron: "0 0 30 2 *"}, at, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := compile(t, tc.t).Next(tc.from)
			if !got.Equal(tc.want) || (!got.IsZero() && got.Location() != time.UTC) {
				t.Errorf("Next(%v) = %v, want %v in UTC", tc.from, got, tc.want)
			}
		})
	}
}

// TestIntervalFiringsDoNotDependOnTheAsker: every node computes the same
// firings of an interval, whatever moment it asks from, even for an
// interval that does not divide a day.
func TestIntervalFiringsDoNotDependOnTheAsker(t *testing.T) {
	t.Parallel()
	for _, every := range []time.Duration{7 * time.Minute, 90 * time.Second, 25 * time.Hour} {
		p := compile(t, maintenance.Timing{Every: every})
		from := time.Date(2026, 3, 28, 22, 30, 0, 0, time.UTC)
		first := p.Next(from)
		if d := first.Sub(from); d <= 0 || d > every {
			t.Fatalf("every %v: first firing %v after %v", every, d, from)
		}
		for _, other := range []time.Time{first.Add(-every + time.Second), first.Add(-time.Nanosecond), first.Add(-every / 2)} {
			if got := p.Next(other); !got.Equal(first) {
				t.Errorf("every %v: Next(%v) = %v, another node got %v", every, other, got, first)
			}
		}
		if got := p.Next(first); !got.Equal(first.Add(every)) {
			t.Errorf("every %v: the firing after %v is %v", every, first, got)
		}
	}
}

func TestPlanKey(t *testing.T) {
	t.Parallel()
	f := time.Date(2026, 3, 28, 23, 30, 0, 0, time.UTC) // already the 29th in Paris
	for _, tc := range []struct {
		t    maintenance.Timing
		want string
	}{
		{maintenance.Timing{Every: time.Hour}, "nightly:acme:2026-03-28T23:30"},
		{maintenance.Timing{Every: time.Hour, Grain: key.GrainHour}, "nightly:acme:2026-03-28T23"},
		{maintenance.Timing{Every: 24 * time.Hour, Grain: key.GrainDay}, "nightly:acme:2026-03-28"},
		{maintenance.Timing{Every: 24 * time.Hour, Grain: key.GrainDay, Timezone: "Europe/Paris"}, "nightly:acme:2026-03-29"},
	} {
		k, err := compile(t, tc.t).Key("nightly", "acme", f)
		if err != nil || k != tc.want {
			t.Errorf("%+v: key %q %v, want %q", tc.t, k, err, tc.want)
		}
	}
	if _, err := compile(t, maintenance.Timing{Every: time.Hour}).Key("bad:name", "acme", f); err == nil {
		t.Error("a name with ':' made a key")
	}
}

// TestPlanSpringForwardGap pins what docs/schedules.md says of a time a
// spring-forward skips (robfig/cron's rule): it does not fire that day, not
// at the first instant after the gap either, whether the change is an hour
// or 30 minutes (Lord Howe) and even when it skips midnight (Santiago,
// Havana: a daily 00:00 does not fire that day); the firings outside the
// gap keep their wall-clock times, and an interval (every) is unaffected.
func TestPlanSpringForwardGap(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cron, zone string
		from       time.Time // UTC
		want       []string  // the next firings, local "01-02 15:04"
	}{
		// Lord Howe, 2026-10-04: 02:00 +10:30 becomes 02:30 +11.
		{"15 2 * * *", "Australia/Lord_Howe", time.Date(2026, 10, 3, 0, 0, 0, 0, time.UTC), []string{"10-05 02:15", "10-06 02:15"}},
		{"0 2 * * *", "Australia/Lord_Howe", time.Date(2026, 10, 3, 0, 0, 0, 0, time.UTC), []string{"10-05 02:00", "10-06 02:00"}},
		{"45 2 * * *", "Australia/Lord_Howe", time.Date(2026, 10, 3, 0, 0, 0, 0, time.UTC), []string{"10-04 02:45", "10-05 02:45"}},
		{"*/15 * * * *", "Australia/Lord_Howe", time.Date(2026, 10, 3, 15, 0, 0, 0, time.UTC), []string{"10-04 01:45", "10-04 02:30", "10-04 02:45"}},
		// Santiago, 2026-09-06, and Havana, 2026-03-08: 00:00 becomes 01:00.
		{"0 0 * * *", "America/Santiago", time.Date(2026, 9, 4, 12, 0, 0, 0, time.UTC), []string{"09-05 00:00", "09-07 00:00"}},
		{"30 0 * * *", "America/Santiago", time.Date(2026, 9, 4, 12, 0, 0, 0, time.UTC), []string{"09-05 00:30", "09-07 00:30"}},
		{"0 0 * * *", "America/Havana", time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC), []string{"03-09 00:00", "03-10 00:00"}},
		// Berlin, 2026-03-29: 02:00 becomes 03:00.
		{"30 2 * * *", "Europe/Berlin", time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC), []string{"03-30 02:30"}},
	} {
		p := compile(t, maintenance.Timing{Cron: tc.cron, Timezone: tc.zone})
		f := tc.from
		var got []string
		for range tc.want {
			f = p.Next(f)
			got = append(got, f.In(p.Location()).Format("01-02 15:04"))
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%q in %s from %v: %v, want %v", tc.cron, tc.zone, tc.from, got, tc.want)
		}
	}
	// An interval keeps its UTC firings across the gap: 15:00 and 15:30 UTC
	// are 01:30 +10:30 and 02:30 +11 (02:00 local does not exist).
	every := compile(t, maintenance.Timing{Every: 30 * time.Minute, Timezone: "Australia/Lord_Howe"})
	if got := every.Next(time.Date(2026, 10, 3, 15, 0, 0, 0, time.UTC)); !got.Equal(time.Date(2026, 10, 3, 15, 30, 0, 0, time.UTC)) {
		t.Errorf("every 30m across the Lord Howe gap: %v", got)
	}
}

func TestPlanRepeat(t *testing.T) {
	t.Parallel()
	utc := func(mo time.Month, d, h, m int) time.Time { return time.Date(2026, mo, d, h, m, 0, 0, time.UTC) }
	for _, tc := range []struct {
		zone    string
		f, want time.Time // want zero: the wall-clock time of f comes once
	}{
		{"Europe/Berlin", utc(10, 25, 0, 30), utc(10, 25, 1, 30)}, // 02:30 CEST, again at 02:30 CET
		{"Europe/Berlin", utc(10, 25, 0, 0), utc(10, 25, 1, 0)},   // 02:00
		{"Europe/Berlin", utc(10, 24, 23, 30), time.Time{}},       // 01:30 CEST, before the repeated hour
		{"Europe/Berlin", utc(10, 25, 1, 30), time.Time{}},        // the repeat itself
		{"Europe/Berlin", utc(3, 29, 0, 30), time.Time{}},         // spring forward
		{"America/New_York", utc(11, 1, 5, 30), utc(11, 1, 6, 30)},
		{"Australia/Lord_Howe", utc(4, 4, 14, 45), utc(4, 4, 15, 15)}, // a 30-minute change: 01:45
		{"", utc(10, 25, 0, 30), time.Time{}},
	} {
		got := compile(t, maintenance.Timing{Cron: "* * * * *", Timezone: tc.zone}).Repeat(tc.f)
		if !got.Equal(tc.want) {
			t.Errorf("%s: Repeat(%v) = %v, want %v", tc.zone, tc.f, got, tc.want)
		}
	}
}

func TestCheckGrain(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		t  maintenance.Timing
		ok bool
	}{
		{maintenance.Timing{Every: time.Minute}, true},
		{maintenance.Timing{Every: 30 * time.Minute, Grain: key.GrainHour}, false},
		{maintenance.Timing{Every: time.Hour, Grain: key.GrainHour}, true},
		{maintenance.Timing{Every: 12 * time.Hour, Grain: key.GrainDay}, false},
		{maintenance.Timing{Every: 24 * time.Hour, Grain: key.GrainDay}, true},
		{maintenance.Timing{Cron: "* * * * *"}, true},
		{maintenance.Timing{Cron: "*/10 * * * * *"}, false}, // every 10 s at minute grain
		{maintenance.Timing{Cron: "0,30 * * * *", Grain: key.GrainHour}, false},
		{maintenance.Timing{Cron: "0 * * * *", Grain: key.GrainHour}, true},
		{maintenance.Timing{Cron: "0 3,15 * * *", Grain: key.GrainDay}, false},
		{maintenance.Timing{Cron: "0 3 * * *", Grain: key.GrainDay, Timezone: "Europe/Paris"}, true},
		{maintenance.Timing{Cron: "0 0 30 2 *", Grain: key.GrainDay}, true}, // never fires
		// Two firings a day 23 h apart still share the date.
		{maintenance.Timing{Cron: "0 0,23 * * *", Grain: key.GrainDay}, false},
		{maintenance.Timing{Cron: "0 1,23 * * *", Grain: key.GrainDay, Timezone: "Europe/Berlin"}, false},
		// The repeated autumn hour fires twice at one wall-clock time: one job.
		{maintenance.Timing{Cron: "0 * * * *", Grain: key.GrainHour, Timezone: "Europe/Berlin"}, true},
		{maintenance.Timing{Every: time.Hour, Grain: key.GrainHour, Timezone: "Europe/Berlin"}, true},
		{maintenance.Timing{Every: time.Minute, Timezone: "Europe/Berlin"}, true},
		// Every 24 h from 00:00 UTC: 01:00 or 02:00 in Berlin, never two on
		// one date; in Atlantic/Azores (UTC+0 in summer, UTC-1 in winter) the
		// 25-hour 2026-10-25 gets the firings of 00:00 and 23:00 local.
		{maintenance.Timing{Every: 24 * time.Hour, Grain: key.GrainDay, Timezone: "Europe/Berlin"}, true},
		{maintenance.Timing{Every: 24 * time.Hour, Grain: key.GrainDay, Timezone: "America/New_York"}, true},
		{maintenance.Timing{Every: 24 * time.Hour, Grain: key.GrainDay, Timezone: "Atlantic/Azores"}, false},
		{maintenance.Timing{Every: 25 * time.Hour, Grain: key.GrainDay, Timezone: "Atlantic/Azores"}, true},
		{maintenance.Timing{Every: 48 * time.Hour, Grain: key.GrainDay, Timezone: "Atlantic/Azores"}, true},
		// A 30-minute daylight-saving change: the firings of 01:00 (+11) and
		// 01:30 (+10:30), 60 minutes apart, share the local hour 01.
		{maintenance.Timing{Every: time.Hour, Grain: key.GrainHour, Timezone: "Australia/Lord_Howe"}, false},
		{maintenance.Timing{Every: 2 * time.Hour, Grain: key.GrainHour, Timezone: "Australia/Lord_Howe"}, true},
	} {
		err := compile(t, tc.t).CheckGrain()
		if (err == nil) != tc.ok {
			t.Errorf("%+v: CheckGrain %v, want ok=%v", tc.t, err, tc.ok)
		}
		var ie *idemtype.InvalidError
		if err != nil && (!errors.As(err, &ie) || ie.Field != "grain") {
			t.Errorf("%+v: %v is not an invalid grain", tc.t, err)
		}
	}
}

func TestLatestDue(t *testing.T) {
	t.Parallel()
	hourly := compile(t, maintenance.Timing{Every: time.Hour})
	cron := compile(t, maintenance.Timing{Cron: "0 * * * *"})
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name       string
		after, now time.Time
		last       time.Time
		count      int
	}{
		{"nothing due yet", t0, t0.Add(59 * time.Minute), time.Time{}, 0},
		{"one due", t0, t0.Add(time.Hour), t0.Add(time.Hour), 1},
		{"three missed", t0, t0.Add(3*time.Hour + time.Minute), t0.Add(3 * time.Hour), 3},
		{"a clock stepped back", t0, t0.Add(-2 * time.Hour), time.Time{}, 0},
		{"now equals after", t0, t0, time.Time{}, 0},
		{"after between firings", t0.Add(30 * time.Minute), t0.Add(150 * time.Minute), t0.Add(2 * time.Hour), 2},
	} {
		for name, p := range map[string]*maintenance.Plan{"every": hourly, "cron": cron} {
			last, n := maintenance.LatestDue(p, tc.after, tc.now)
			if !last.Equal(tc.last) || n != tc.count {
				t.Errorf("%s (%s): %v ×%d, want %v ×%d", tc.name, name, last, n, tc.last, tc.count)
			}
		}
	}
}

// firings records what the scheduler fired, and fires it in st (a job
// keyed by schedule and firing time, recorded with the firing).
type firings struct {
	st   store.Store
	mu   sync.Mutex
	list []maintenance.Firing
	err  error
}

func (f *firings) fire(ctx context.Context, x *maintenance.Firing) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return false, f.err
	}
	job := &store.JobInsertParams{Tenant: x.Schedule.Tenant, Queue: "q", Kind: x.Schedule.Name, Args: []byte("{}"), MaxAttempts: 1,
		RunAt: x.At, IdempotencyKey: x.Schedule.Name + ":" + x.At.Format(time.RFC3339), DedupWindow: time.Hour, ResultTTL: time.Hour}
	res, err := f.st.ScheduleFire(ctx, &store.ScheduleFireParams{Read: x.Schedule, At: x.At, Job: job, Now: x.At})
	if err != nil || res.Stale {
		return false, err
	}
	if res.Insert.Err != nil {
		return false, res.Insert.Err
	}
	f.list = append(f.list, *x)
	return true, nil
}

func (f *firings) taken() []maintenance.Firing {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.list
	f.list = nil
	return out
}

// planOf reads a Timing stored as JSON in the schedule's Spec.
func planOf(s *store.Schedule) (*maintenance.Plan, error) {
	var tm maintenance.Timing
	if err := json.Unmarshal(s.Spec, &tm); err != nil {
		return nil, err
	}
	return maintenance.Compile(tm)
}

func putSchedule(t *testing.T, st store.Store, name string, tm maintenance.Timing, created time.Time) {
	t.Helper()
	spec, _ := json.Marshal(tm)
	if _, err := st.ScheduleUpsert(context.Background(), &store.ScheduleUpsertParams{Tenant: "acme", Name: name, Spec: spec, Now: created}); err != nil {
		t.Fatal(err)
	}
}

func TestSchedulerRunOnce(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx := context.Background()
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	clk := &clock{now: t0}
	fired := firings{st: st}
	s := maintenance.NewScheduler(st, &maintenance.Config{Now: clk.Now, ScheduleGrace: time.Minute}, planOf, fired.fire)

	putSchedule(t, st, "hourly", maintenance.Timing{Every: time.Hour}, t0)
	putSchedule(t, st, "catchup", maintenance.Timing{Every: time.Hour, Missed: maintenance.MissedCatchUp}, t0)

	if n, err := s.RunOnce(ctx); err != nil || n != 0 {
		t.Fatalf("nothing due: %d %v", n, err)
	}
	// On time: both fire once.
	clk.Set(t0.Add(time.Hour + 10*time.Second))
	if n, err := s.RunOnce(ctx); err != nil || n != 2 {
		t.Fatalf("due: %d %v", n, err)
	}
	got := fired.taken()
	if len(got) != 2 || !got[0].At.Equal(t0.Add(time.Hour)) || got[0].Missed != 0 {
		t.Fatalf("firings %+v", got)
	}
	// The same moment again fires nothing: LastFiredAt moved forward.
	if n, _ := s.RunOnce(ctx); n != 0 || len(fired.taken()) != 0 {
		t.Fatal("a firing ran twice")
	}
	sc, err := st.ScheduleGet(ctx, &store.ScheduleGetParams{Tenant: "acme", Name: "hourly"})
	if err != nil || sc.LastFiredAt == nil || !sc.LastFiredAt.Equal(t0.Add(time.Hour)) || sc.LastJobID == 0 {
		t.Fatalf("stored firing %+v %v", sc, err)
	}

	// Every node was down for three hours: skip drops the missed firings
	// and records the newest as fired; catch_up runs one job for them.
	clk.Set(t0.Add(4*time.Hour + 5*time.Minute))
	if n, err := s.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("after downtime: %d %v", n, err)
	}
	got = fired.taken()
	if len(got) != 1 || got[0].Schedule.Name != "catchup" || !got[0].At.Equal(t0.Add(4*time.Hour)) || got[0].Missed != 2 {
		t.Fatalf("catch-up firing %+v", got)
	}
	sc, _ = st.ScheduleGet(ctx, &store.ScheduleGetParams{Tenant: "acme", Name: "hourly"})
	if !sc.LastFiredAt.Equal(t0.Add(4 * time.Hour)) {
		t.Fatalf("skipped firings not marked: %v", sc.LastFiredAt)
	}
	// Back on schedule.
	clk.Set(t0.Add(5*time.Hour + time.Second))
	if n, _ := s.RunOnce(ctx); n != 2 {
		t.Fatalf("next hour: %d", n)
	}
	fired.taken()

	// A clock stepped back fires nothing and moves nothing.
	clk.Set(t0.Add(2 * time.Hour))
	if n, _ := s.RunOnce(ctx); n != 0 {
		t.Fatalf("clock stepped back: %d", n)
	}
}

func TestSchedulerGoesOnPastAFailingSchedule(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx := context.Background()
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	clk := &clock{now: t0.Add(time.Hour)}
	fired := firings{st: st}
	s := maintenance.NewScheduler(st, &maintenance.Config{Now: clk.Now}, planOf, fired.fire)
	putSchedule(t, st, "a-good", maintenance.Timing{Every: time.Hour}, t0)
	if _, err := st.ScheduleUpsert(ctx, &store.ScheduleUpsertParams{Tenant: "acme", Name: "b-broken",
		Spec: json.RawMessage(`{"Cron":"not a cron"}`), Now: t0}); err != nil {
		t.Fatal(err)
	}
	putSchedule(t, st, "c-good", maintenance.Timing{Every: time.Hour}, t0)
	if n, err := s.RunOnce(ctx); err != nil || n != 2 {
		t.Fatalf("run: %d %v, want the two good schedules fired", n, err)
	}
	// A failing enqueue leaves the firing due for the next run.
	clk.Set(t0.Add(2 * time.Hour))
	fired.mu.Lock()
	fired.err = fmt.Errorf("store unavailable: %w", idemtype.ErrUnavailable)
	fired.mu.Unlock()
	if n, err := s.RunOnce(ctx); err != nil || n != 0 {
		t.Fatalf("failing fire: %d %v", n, err)
	}
	fired.mu.Lock()
	fired.err = nil
	fired.mu.Unlock()
	fired.taken()
	if n, _ := s.RunOnce(ctx); n != 2 {
		t.Fatalf("retry after the failure: %d, want 2", n)
	}
	// A cancelled context stops the run with its error.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.RunOnce(cctx); err == nil {
		t.Fatal("RunOnce with a cancelled context succeeded")
	}
}
