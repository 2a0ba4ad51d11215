package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/key"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/pgstore"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// schedDay is midnight UTC of the simulated day.
var schedDay = time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)

// storeKind opens stores of one backend; reopen returns a new handle on the
// same database (a restarted process).
type storeKind struct {
	name string
	open func(t *testing.T) (first store.Store, reopen func() store.Store)
}

func storeKinds() []storeKind {
	return []storeKind{
		{"sqlite", func(t *testing.T) (store.Store, func() store.Store) {
			path := filepath.Join(t.TempDir(), "idem.db")
			open := func() store.Store {
				st, err := sqlitestore.Open(context.Background(), path, nil)
				if err != nil {
					t.Fatalf("open store: %v", err)
				}
				t.Cleanup(func() { st.Close() })
				return st
			}
			return open(), open
		}},
		{"postgres", func(t *testing.T) (store.Store, func() store.Store) {
			url, schema := dbtest.NewSchema(t)
			open := func() store.Store {
				pool, err := pgxpool.New(context.Background(), url)
				if err != nil {
					t.Fatal(err)
				}
				// CallerClock: these tests drive time with a fake idem.Config.Now.
				st, err := pgstore.New(context.Background(), pool, &pgstore.Config{Schema: schema, CallerClock: true})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { st.Close(); pool.Close() })
				return st
			}
			return open(), open
		}},
	}
}

// schedClient returns an insert-only client on st with clock.
func schedClient(t *testing.T, st store.Store, clock *fakeClock) *idem.Client {
	t.Helper()
	c, err := idem.NewClient(st, &idem.Config{Now: clock.Now, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// putSchedule puts s and fails the test on error.
func putSchedule(t *testing.T, c *idem.Client, s idem.Schedule) *idem.ScheduleInfo {
	t.Helper()
	info, err := c.SchedulePut(t.Context(), &s)
	if err != nil {
		t.Fatalf("SchedulePut(%s): %v", s.Name, err)
	}
	return info
}

// runSchedulers runs one scheduler pass of every client at once.
func runSchedulers(t *testing.T, clients []*idem.Client) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(clients))
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := idem.RunSchedulerOnce(c); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("scheduler: %v", err)
	}
}

// firingKeys returns the idempotency keys of every job, counting repeats.
func firingKeys(t *testing.T, c *idem.Client) map[string]int {
	t.Helper()
	out := map[string]int{}
	var cursor int64
	for {
		jobs, next, err := c.JobListAll(t.Context(), &idem.JobListParams{Limit: 500, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			out[j.IdempotencyKey]++
		}
		if next == 0 {
			return out
		}
		cursor = next
	}
}

// daySchedules are the seed's scheduled functions: every 5 minutes,
// every 15 minutes, hourly and daily (03:00 in Berlin).
func daySchedules() []idem.Schedule {
	return []idem.Schedule{
		{Name: "detect-alerts", Every: 5 * time.Minute, Kind: "detect"},
		{Name: "sync-orders", Cron: "*/15 * * * *", Kind: "sync", Missed: idem.MissedCatchUp},
		{Name: "rollup", Cron: "0 * * * *", Grain: key.GrainHour, Kind: "rollup"},
		{Name: "cdp-build", Cron: "0 3 * * *", Timezone: "Europe/Berlin", Grain: key.GrainDay, Kind: "cdp"},
	}
}

// expectedDayKeys lists the firing keys of daySchedules over the day, less
// those strictly inside (gapFrom, gapTo): a forward clock step.
func expectedDayKeys(t *testing.T, gapFrom, gapTo time.Time) map[string]int {
	t.Helper()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	add := func(name string, f time.Time, loc *time.Location, g key.Grain) {
		if f.After(gapFrom) && f.Before(gapTo) {
			return
		}
		k, err := key.Lock(name, "default", f, loc, g, nil)
		if err != nil {
			t.Fatal(err)
		}
		want[idem.ScheduleKeyPrefix+k] = 1
	}
	end := schedDay.Add(24 * time.Hour)
	for f := schedDay.Add(5 * time.Minute); !f.After(end); f = f.Add(5 * time.Minute) {
		add("detect-alerts", f, time.UTC, key.GrainMinute)
		if f.Minute()%15 == 0 {
			add("sync-orders", f, time.UTC, key.GrainMinute)
		}
		if f.Minute() == 0 {
			add("rollup", f, time.UTC, key.GrainHour)
		}
		if l := f.In(berlin); l.Hour() == 3 && l.Minute() == 0 {
			add("cdp-build", f, berlin, key.GrainDay)
		}
	}
	return want
}

// TestScheduleTenSchedulersOneJobPerFiring runs ten schedulers (each its
// own Client on one store) over a simulated day in 5-minute steps, with a
// clock step back of 45 minutes at noon, a restart of every client (and
// store handle) at 06:00 and a clock step forward of 2 h at 18:00: every
// firing has exactly one job, nothing fires twice, and only the firings
// the forward step jumped over are missing.
func TestScheduleTenSchedulersOneJobPerFiring(t *testing.T) {
	t.Parallel()
	for _, sk := range storeKinds() {
		t.Run(sk.name, func(t *testing.T) {
			t.Parallel()
			st, reopen := sk.open(t)
			clock := &fakeClock{now: schedDay}
			newClients := func(st store.Store) []*idem.Client {
				cs := make([]*idem.Client, 10)
				for i := range cs {
					cs[i] = schedClient(t, st, clock)
				}
				return cs
			}
			clients := newClients(st)
			for _, s := range daySchedules() {
				putSchedule(t, clients[0], s)
			}
			steppedBack, restarted, jumped := false, false, false
			for clock.Now().Before(schedDay.Add(24 * time.Hour)) {
				clock.Add(5 * time.Minute)
				now := clock.Now()
				switch {
				case !restarted && !now.Before(schedDay.Add(6*time.Hour)):
					restarted = true
					clients = newClients(reopen())
				case !steppedBack && !now.Before(schedDay.Add(12*time.Hour)):
					steppedBack = true
					clock.Add(-45 * time.Minute)
				case !jumped && !now.Before(schedDay.Add(18*time.Hour)):
					jumped = true
					clock.Add(2 * time.Hour)
				}
				runSchedulers(t, clients)
			}
			got := firingKeys(t, clients[0])
			// The jump happens at 18:00 before any scheduler ran then: the
			// last run was at 17:55, the next at 20:00.
			want := expectedDayKeys(t, schedDay.Add(18*time.Hour-5*time.Minute), schedDay.Add(20*time.Hour))
			compareKeys(t, got, want)
			info, err := clients[0].ScheduleGet(t.Context(), "", "detect-alerts")
			if err != nil {
				t.Fatal(err)
			}
			if info.LastFiredAt == nil || !info.LastFiredAt.Equal(schedDay.Add(24*time.Hour)) || info.LastJobState != idem.StateAvailable {
				t.Errorf("detect-alerts: last fired %v (job state %q), want %v available", info.LastFiredAt, info.LastJobState, schedDay.Add(24*time.Hour))
			}
		})
	}
}

// compareKeys reports keys with more than one job, missing and unexpected keys.
func compareKeys(t *testing.T, got, want map[string]int) {
	t.Helper()
	var dup, missing, extra []string
	for k, n := range got {
		if n > 1 {
			dup = append(dup, k)
		}
		if want[k] == 0 {
			extra = append(extra, k)
		}
	}
	for k := range want {
		if got[k] == 0 {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(dup)+len(missing)+len(extra) > 0 {
		t.Errorf("%d jobs for %d firings: fired twice %v; missing %v; unexpected %v", len(got), len(want), dup, missing, extra)
		return
	}
	t.Logf("%d firings, each one job", len(want))
}

// TestScheduleMissedPolicy takes every scheduler down from 00:00 to 05:00:
// the skip schedule drops its 03:00 firing, the catch-up schedule runs it
// once (and an hourly catch-up schedule runs once for its five missed
// firings); both fire normally afterwards.
func TestScheduleMissedPolicy(t *testing.T) {
	t.Parallel()
	for _, sk := range storeKinds() {
		t.Run(sk.name, func(t *testing.T) {
			t.Parallel()
			st, _ := sk.open(t)
			clock := &fakeClock{now: schedDay}
			c := schedClient(t, st, clock)
			putSchedule(t, c, idem.Schedule{Name: "skipper", Cron: "0 3 * * *", Kind: "k"})
			putSchedule(t, c, idem.Schedule{Name: "catcher", Cron: "0 3 * * *", Kind: "k", Missed: idem.MissedCatchUp})
			putSchedule(t, c, idem.Schedule{Name: "hourly", Cron: "0 * * * *", Kind: "k", Missed: idem.MissedCatchUp})
			runSchedulers(t, []*idem.Client{c})
			clock.Add(5*time.Hour + 30*time.Second) // down until 05:00:30
			runSchedulers(t, []*idem.Client{c})
			got := firingKeys(t, c)
			want := map[string]int{
				idem.ScheduleKeyPrefix + "catcher:default:2026-11-26T03:00": 1,
				idem.ScheduleKeyPrefix + "hourly:default:2026-11-26T05:00":  1,
			}
			compareKeys(t, got, want)
			skip, err := c.ScheduleGet(t.Context(), "", "skipper")
			if err != nil {
				t.Fatal(err)
			}
			if skip.LastFiredAt == nil || !skip.LastFiredAt.Equal(schedDay.Add(3*time.Hour)) || skip.LastJobID != 0 {
				t.Errorf("skipper: last fired %v job %d, want 03:00 and no job", skip.LastFiredAt, skip.LastJobID)
			}
			if skip.NextFireAt == nil || !skip.NextFireAt.Equal(schedDay.Add(27*time.Hour)) {
				t.Errorf("skipper: next firing %v, want tomorrow 03:00", skip.NextFireAt)
			}
			clock.Add(22 * time.Hour) // 03:00:30 the next day: both run on time
			runSchedulers(t, []*idem.Client{c})
			got = firingKeys(t, c)
			for _, k := range []string{"skipper:default:2026-11-27T03:00", "catcher:default:2026-11-27T03:00"} {
				if got[idem.ScheduleKeyPrefix+k] != 1 {
					t.Errorf("%s: %d jobs, want 1", k, got[idem.ScheduleKeyPrefix+k])
				}
			}
		})
	}
}

// TestScheduleTrigger: a manual trigger is a firing of its own; it neither
// blocks nor repeats the scheduled firing, and a trigger key makes repeats
// one job.
func TestScheduleTrigger(t *testing.T) {
	t.Parallel()
	for _, sk := range storeKinds() {
		t.Run(sk.name, func(t *testing.T) {
			t.Parallel()
			st, _ := sk.open(t)
			clock := &fakeClock{now: schedDay.Add(59 * time.Minute)}
			c := schedClient(t, st, clock)
			putSchedule(t, c, idem.Schedule{Name: "report", Cron: "0 * * * *", Kind: "report", Args: []byte(`{"full":true}`)})
			a, err := c.ScheduleTrigger(t.Context(), "", "report", nil)
			if err != nil {
				t.Fatal(err)
			}
			b, err := c.ScheduleTrigger(t.Context(), "", "report", nil)
			if err != nil {
				t.Fatal(err)
			}
			if a.Job.ID == b.Job.ID || a.Existing || b.Existing {
				t.Errorf("two plain triggers gave jobs %d and %d (existing %v %v), want two new jobs", a.Job.ID, b.Job.ID, a.Existing, b.Existing)
			}
			k1, err := c.ScheduleTrigger(t.Context(), "", "report", &idem.ScheduleTriggerOpts{Key: "deploy-42"})
			if err != nil {
				t.Fatal(err)
			}
			k2, err := c.ScheduleTrigger(t.Context(), "", "report", &idem.ScheduleTriggerOpts{Key: "deploy-42"})
			if err != nil {
				t.Fatal(err)
			}
			if k1.Job.ID != k2.Job.ID || !k2.Existing {
				t.Errorf("keyed triggers gave jobs %d and %d (existing %v), want one", k1.Job.ID, k2.Job.ID, k2.Existing)
			}
			if string(k1.Job.Args) != `{"full":true}` || k1.Job.Kind != "report" {
				t.Errorf("trigger job = %s %s", k1.Job.Kind, k1.Job.Args)
			}
			clock.Add(time.Minute) // 01:00: the scheduled firing still runs
			runSchedulers(t, []*idem.Client{c})
			got := firingKeys(t, c)
			if got[idem.ScheduleKeyPrefix+"report:default:2026-11-26T01:00"] != 1 || len(got) != 4 {
				t.Errorf("jobs by key = %v, want three triggers and the 01:00 firing", got)
			}
			if _, err := c.ScheduleTrigger(t.Context(), "", "nope", nil); !errors.Is(err, idem.ErrNotFound) {
				t.Errorf("trigger of an unknown schedule: %v, want ErrNotFound", err)
			}
		})
	}
}

// TestScheduleBadInput: every invalid field is an *InvalidError naming it,
// and nothing is stored.
func TestScheduleBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	hour := time.Minute
	cases := []struct {
		field string
		s     idem.Schedule
	}{
		{"cron", idem.Schedule{Name: "a", Cron: "61 * * * *", Kind: "k"}},
		{"cron", idem.Schedule{Name: "a", Cron: "CRON_TZ=UTC 0 * * * *", Kind: "k"}},
		{"cron", idem.Schedule{Name: "a", Kind: "k"}},
		{"cron", idem.Schedule{Name: "a", Cron: "0 * * * *", Every: time.Hour, Kind: "k"}},
		{"timezone", idem.Schedule{Name: "a", Cron: "0 * * * *", Timezone: "Mars/Olympus", Kind: "k"}},
		{"every", idem.Schedule{Name: "a", Every: 30 * time.Second, Kind: "k"}},
		{"every", idem.Schedule{Name: "a", Every: -time.Hour, Kind: "k"}},
		{"missed", idem.Schedule{Name: "a", Every: time.Hour, Missed: "later", Kind: "k"}},
		{"grain", idem.Schedule{Name: "a", Cron: "*/10 * * * * *", Kind: "k"}},
		{"grain", idem.Schedule{Name: "a", Cron: "0 * * * *", Grain: key.GrainDay, Kind: "k"}},
		{"grain", idem.Schedule{Name: "a", Every: time.Hour, Grain: "week", Kind: "k"}},
		// Two firings a day, 23 h apart, share the date at day grain.
		{"grain", idem.Schedule{Name: "a", Cron: "0 0,23 * * *", Grain: key.GrainDay, Kind: "k"}},
		// Every 24 h from 00:00 UTC in Atlantic/Azores (UTC+0 in summer,
		// UTC-1 in winter): the 25-hour 2026-10-25 gets the firings of
		// 00:00 and 23:00 local, one key.
		{"grain", idem.Schedule{Name: "a", Every: 24 * time.Hour, Timezone: "Atlantic/Azores", Grain: key.GrainDay, Kind: "k"}},
		{"name", idem.Schedule{Name: "a:b", Every: time.Hour, Kind: "k"}},
		{"name", idem.Schedule{Every: time.Hour, Kind: "k"}},
		{"kind", idem.Schedule{Name: "a", Every: time.Hour}},
		{"args", idem.Schedule{Name: "a", Every: time.Hour, Kind: "k", Args: []byte(`{`)}},
		{"dedup_window", idem.Schedule{Name: "a", Every: time.Hour, Kind: "k", DedupWindow: &hour}},
	}
	for _, c := range cases {
		_, err := b.client.SchedulePut(t.Context(), &c.s)
		var inv *idem.InvalidError
		if !errors.As(err, &inv) || inv.Field != c.field || !errors.Is(err, idem.ErrInvalid) {
			t.Errorf("%+v: err = %v, want an invalid %s", c.s, err, c.field)
		}
	}
	list, err := b.client.ScheduleList(t.Context(), "")
	if err != nil || len(list) != 0 {
		t.Errorf("after bad input: %d schedules stored (err %v)", len(list), err)
	}
}

// TestScheduleDayGrainAcrossDST: a schedule accepted at day grain makes one
// job per firing across a 25-hour day: every 24 h in Europe/Berlin (01:00 or
// 02:00 local) and every 25 h in Atlantic/Azores.
func TestScheduleDayGrainAcrossDST(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s     idem.Schedule
		start time.Time
	}{
		{idem.Schedule{Name: "berlin", Every: 24 * time.Hour, Timezone: "Europe/Berlin", Grain: key.GrainDay, Kind: "k"},
			time.Date(2026, 10, 24, 0, 0, 0, 0, time.UTC)},
		{idem.Schedule{Name: "azores", Every: 25 * time.Hour, Timezone: "Atlantic/Azores", Grain: key.GrainDay, Kind: "k"},
			time.Date(2026, 10, 24, 0, 0, 0, 0, time.UTC)},
	} {
		t.Run(tc.s.Name, func(t *testing.T) {
			t.Parallel()
			clock := &fakeClock{now: tc.start}
			c := schedClient(t, testStore(t), clock)
			if _, err := c.SchedulePut(t.Context(), &tc.s); err != nil {
				t.Fatal(err)
			}
			f := tc.start.Truncate(tc.s.Every)
			for range 4 {
				f = f.Add(tc.s.Every)
				clock.mu.Lock()
				clock.now = f.Add(30 * time.Second)
				clock.mu.Unlock()
				if _, err := idem.RunSchedulerOnce(c); err != nil {
					t.Fatal(err)
				}
			}
			got := firingKeys(t, c)
			n := 0
			for _, c := range got {
				n += c
			}
			if n != 4 || len(got) != 4 {
				t.Fatalf("4 firings made the jobs %v", got)
			}
		})
	}
}

// TestScheduleDeleteKeepsJobs: deleting a schedule keeps its jobs, and
// putting it back does not repeat a firing that ran.
func TestScheduleDeleteKeepsJobs(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: schedDay}
	c := schedClient(t, testStore(t), clock)
	s := idem.Schedule{Name: "tick", Every: 10 * time.Minute, Kind: "tick"}
	putSchedule(t, c, s)
	clock.Add(10 * time.Minute)
	runSchedulers(t, []*idem.Client{c})
	if err := c.ScheduleDelete(t.Context(), "", "tick"); err != nil {
		t.Fatal(err)
	}
	if err := c.ScheduleDelete(t.Context(), "", "tick"); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("second delete: %v, want ErrNotFound", err)
	}
	clock.Add(-5 * time.Minute) // put back before the firing it already made
	putSchedule(t, c, s)
	clock.Add(5 * time.Minute)
	runSchedulers(t, []*idem.Client{c})
	compareKeys(t, firingKeys(t, c), map[string]int{idem.ScheduleKeyPrefix + "tick:default:2026-11-26T00:10": 1})
}

// TestScheduleConfigAndLeader: Config.Schedules are stored by Start and
// fired by the started client's own scheduler (the leader).
func TestScheduleConfigAndLeader(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: schedDay.Add(time.Minute)}
	b := setup(t, &idem.Config{Now: clock.Now, Queues: queues(1), ScheduleInterval: 10 * time.Millisecond,
		Schedules: []idem.Schedule{{Name: "cfg", Cron: "* * * * *", Kind: "noop"}}})
	done := make(chan int64, 10)
	b.workers.Handle("noop", func(_ context.Context, j *idem.JobRow) (json.RawMessage, error) {
		done <- j.ID
		return nil, nil
	})
	b.start(t)
	clock.Add(time.Minute)
	select {
	case id := <-done:
		j, err := b.client.JobGet(t.Context(), "", id)
		if err != nil || j.IdempotencyKey != idem.ScheduleKeyPrefix+"cfg:default:2026-11-26T00:02" {
			t.Errorf("job %d key %q (err %v)", id, j.IdempotencyKey, err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("the configured schedule never fired")
	}
}

// TestScheduleRetryPolicy: seed 004's scheduled functions retry a failed
// run after 1 s, 5 s and 25 s, then give up; a schedule's Retry is the
// policy of every job it fires, kept with the schedule. A bad policy is
// refused naming retry.
func TestScheduleRetryPolicy(t *testing.T) {
	t.Parallel()
	for _, sk := range storeKinds() {
		t.Run(sk.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			st, _ := sk.open(t)
			clock := &fakeClock{now: schedDay.Add(2*time.Hour + 59*time.Minute)}
			c := schedClient(t, st, clock)
			seed := &idem.RetryPolicy{Base: time.Second, Factor: 5, Jitter: -1}
			info := putSchedule(t, c, idem.Schedule{Name: "cdp-build", Cron: "0 3 * * *", Grain: key.GrainDay,
				Kind: "cdp-build", Queue: "scheduled", MaxAttempts: 4, Retry: seed})
			if info.Retry == nil || info.Retry.Base != time.Second || info.Retry.Factor != 5 || info.Retry.Jitter != -1 {
				t.Fatalf("stored retry %+v, want %+v", info.Retry, seed)
			}
			clock.Add(time.Minute) // 03:00: the run of the day fires
			runSchedulers(t, []*idem.Client{c})
			for attempt, want := range []time.Duration{time.Second, 5 * time.Second, 25 * time.Second, 0} {
				jobs, err := c.Claim(ctx, idem.ClaimParams{Queues: []string{"scheduled"}, WorkerID: "w", Limit: 2})
				if err != nil || len(jobs) != 1 {
					t.Fatalf("attempt %d: claimed %d jobs (%v), want the 03:00 run", attempt+1, len(jobs), err)
				}
				row, err := c.Fail(ctx, "", jobs[0].ID, jobs[0].LeaseToken, idem.FailParams{Error: "warehouse unreachable"})
				if err != nil {
					t.Fatal(err)
				}
				if want == 0 {
					if row.State != idem.StateDead {
						t.Fatalf("after attempt 4: %s, want dead", row.State)
					}
					break
				}
				if wait := row.RunAt.Sub(clock.Now()); row.State != idem.StateRetryable || wait != want {
					t.Fatalf("after attempt %d: %s, next try in %v, want retryable in %v", attempt+1, row.State, wait, want)
				}
				clock.Add(want)
			}
			_, err := c.SchedulePut(ctx, &idem.Schedule{Name: "bad", Every: time.Hour, Kind: "k",
				Retry: &idem.RetryPolicy{Jitter: 2}})
			var inv *idem.InvalidError
			if !errors.As(err, &inv) || inv.Field != "retry" {
				t.Fatalf("a jitter of 2: %v, want an InvalidError naming retry", err)
			}
		})
	}
}
