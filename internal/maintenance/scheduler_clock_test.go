package maintenance_test

import (
	"context"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/maintenance"
	"github.com/idem-dev/idem/store"
)

// TestSchedulerPauseDuringPassSkipsLaterSchedules: the skip policy's grace
// is judged on the clock of each firing, not on one reading for the whole
// pass. A node paused longer than ScheduleGrace after firing the pass's
// first schedule (here the clock moves on when "a" fires) misses the
// second schedule's firing instead of running it late; it used to fire it
// with the pass's stale "now".
func TestSchedulerPauseDuringPassSkipsLaterSchedules(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx := context.Background()
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	clk := &clock{now: t0.Add(time.Hour + 10*time.Second)}
	fired := firings{st: st}
	pause := func(ctx context.Context, f *maintenance.Firing) (bool, error) {
		ok, err := fired.fire(ctx, f)
		if f.Schedule.Name == "a" {
			clk.Set(clk.Now().Add(2 * time.Minute)) // paused past the grace
		}
		return ok, err
	}
	s := maintenance.NewScheduler(st, &maintenance.Config{Now: clk.Now, ScheduleGrace: time.Minute}, planOf, pause)
	putSchedule(t, st, "a", maintenance.Timing{Every: time.Hour}, t0)
	putSchedule(t, st, "b", maintenance.Timing{Every: time.Hour}, t0)

	if n, err := s.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("pass: %d fired, %v; want 1 (a on time, b missed after the pause)", n, err)
	}
	got := fired.taken()
	if len(got) != 1 || got[0].Schedule.Name != "a" {
		t.Fatalf("fired %+v, want only a", got)
	}
	sc, err := st.ScheduleGet(ctx, &store.ScheduleGetParams{Tenant: "acme", Name: "b"})
	if err != nil || sc.LastFiredAt == nil || !sc.LastFiredAt.Equal(t0.Add(time.Hour)) || sc.LastJobID != 0 {
		t.Fatalf("b: %+v %v, want its firing marked missed, no job", sc, err)
	}
}

// TestSchedulerCatchUpAfterYearsIdle: a catch_up schedule firing every
// minute and idle for two years (over the scan's bound of firings) makes one job,
// for its newest firing, in one pass, and nothing on the next pass. The
// scan of the missed firings used to stop at a million, so each pass
// made one job for an old firing.
func TestSchedulerCatchUpAfterYearsIdle(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx := context.Background()
	t0 := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	now := t0.AddDate(2, 0, 0).Add(30 * time.Second)
	clk := &clock{now: now}
	fired := firings{st: st}
	s := maintenance.NewScheduler(st, &maintenance.Config{Now: clk.Now}, planOf, fired.fire)
	putSchedule(t, st, "minutely", maintenance.Timing{Cron: "* * * * *", Missed: maintenance.MissedCatchUp}, t0)

	for pass := range 2 {
		n, err := s.RunOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := fired.taken()
		switch {
		case pass == 0 && (n != 1 || len(got) != 1 || !got[0].At.Equal(now.Truncate(time.Minute)) || got[0].Missed < 99_999):
			t.Fatalf("first pass: %d, %+v; want one job at %v catching up over the scan's bound of firings", n, got, now.Truncate(time.Minute))
		case pass == 1 && (n != 0 || len(got) != 0):
			t.Fatalf("second pass: %d, %+v; want nothing", n, got)
		}
	}
}

// TestLatestDueBeyondTheScan: the newest due firing is found however many
// firings fell due since the mark (the count is exact up to the scan's
// bound, a lower bound past it).
func TestLatestDueBeyondTheScan(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		tm      maintenance.Timing
		idle    time.Duration
		last    time.Time
		atLeast int
	}{
		{"every minute, two years", maintenance.Timing{Cron: "* * * * *"}, 2 * 366 * 24 * time.Hour, t0.Add(2 * 366 * 24 * time.Hour), 1_000_000},
		{"every minute in Berlin, two years", maintenance.Timing{Cron: "* * * * *", Timezone: "Europe/Berlin"}, 2 * 366 * 24 * time.Hour, t0.Add(2 * 366 * 24 * time.Hour), 1_000_000},
		{"every second, twelve days", maintenance.Timing{Cron: "* * * * * *"}, 12 * 24 * time.Hour, t0.Add(12 * 24 * time.Hour), 1_000_000},
		{"Mondays at 9 in Berlin, ten years", maintenance.Timing{Cron: "0 9 * * 1", Timezone: "Europe/Berlin"}, 10 * 365 * 24 * time.Hour,
			time.Date(2034, 4, 24, 7, 0, 0, 0, time.UTC), 500},
	} {
		p := compile(t, tc.tm)
		last, n := maintenance.LatestDue(p, t0, t0.Add(tc.idle).Add(time.Second/2))
		if !last.Equal(tc.last) || n < min(tc.atLeast, 100_000) {
			t.Errorf("%s: %v ×%d, want %v ×(at least %d)", tc.name, last, n, tc.last, tc.atLeast)
		}
	}
}
