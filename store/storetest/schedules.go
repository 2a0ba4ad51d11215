package storetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

func scheduleCases() []testCase {
	return []testCase{
		{"Schedules/upsert keeps creation and firing", testScheduleUpsert},
		{"Schedules/tenant scoped", testScheduleTenants},
		{"Schedules/fired only moves forward", testScheduleFired},
		{"Schedules/delete keeps jobs", testScheduleDelete},
		{"Schedules/concurrent first upserts", testScheduleUpsertRace},
	}
}

func upsertSchedule(t *testing.T, s store.Store, tenant, name, spec string, now time.Time) *store.Schedule {
	t.Helper()
	sc, err := s.ScheduleUpsert(t.Context(), &store.ScheduleUpsertParams{Tenant: tenant, Name: name, Spec: []byte(spec), Now: now})
	if err != nil {
		t.Fatalf("ScheduleUpsert(%s/%s): %v", tenant, name, err)
	}
	return sc
}

func getSchedule(t *testing.T, s store.Store, tenant, name string) *store.Schedule {
	t.Helper()
	sc, err := s.ScheduleGet(t.Context(), &store.ScheduleGetParams{Tenant: tenant, Name: name})
	if err != nil {
		t.Fatalf("ScheduleGet(%s/%s): %v", tenant, name, err)
	}
	return sc
}

func fired(t *testing.T, s store.Store, name string, when time.Time, job int64) bool {
	t.Helper()
	ok, err := s.ScheduleFired(t.Context(), &store.ScheduleFiredParams{Tenant: "t1", Name: name, At: when, JobID: job})
	if err != nil {
		t.Fatalf("ScheduleFired: %v", err)
	}
	return ok
}

func testScheduleUpsert(t *testing.T, s store.Store) {
	first := upsertSchedule(t, s, "t1", "nightly", `{"cron":"0 3 * * *"}`, at(0))
	if !first.CreatedAt.Equal(at(0)) || !first.UpdatedAt.Equal(at(0)) || first.LastFiredAt != nil || first.LastJobID != 0 {
		t.Fatalf("new schedule = %+v", first)
	}
	fired(t, s, "nightly", at(time.Hour), 7)
	second := upsertSchedule(t, s, "t1", "nightly", `{"cron":"0 4 * * *"}`, at(2*time.Hour))
	if string(second.Spec) != `{"cron":"0 4 * * *"}` || !second.CreatedAt.Equal(at(0)) || !second.UpdatedAt.Equal(at(2*time.Hour)) {
		t.Errorf("replaced schedule = %+v", second)
	}
	if second.LastFiredAt == nil || !second.LastFiredAt.Equal(at(time.Hour)) || second.LastJobID != 7 {
		t.Errorf("replace lost the firing mark: %+v", second)
	}
	if got := getSchedule(t, s, "t1", "nightly"); string(got.Spec) != string(second.Spec) || got.CreatedAt.Location() != time.UTC {
		t.Errorf("ScheduleGet = %+v", got)
	}
}

func testScheduleTenants(t *testing.T, s store.Store) {
	upsertSchedule(t, s, "t1", "a", `{}`, at(0))
	upsertSchedule(t, s, "t2", "a", `{}`, at(0))
	upsertSchedule(t, s, "t1", "b", `{}`, at(0))
	_, err := s.ScheduleGet(t.Context(), &store.ScheduleGetParams{Tenant: "t3", Name: "a"})
	if !errors.Is(err, idemtype.ErrNotFound) {
		t.Errorf("other tenant's schedule: err = %v, want ErrNotFound", err)
	}
	for _, c := range []struct {
		tenant string
		want   []string
	}{{"t1", []string{"t1/a", "t1/b"}}, {"t2", []string{"t2/a"}}, {"", []string{"t1/a", "t1/b", "t2/a"}}, {"t3", nil}} {
		list, err := s.ScheduleList(t.Context(), &store.ScheduleListParams{Tenant: c.tenant})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, sc := range list {
			got = append(got, sc.Tenant+"/"+sc.Name)
		}
		if len(got) != len(c.want) || (len(got) > 0 && join(got) != join(c.want)) {
			t.Errorf("ScheduleList(%q) = %v, want %v", c.tenant, got, c.want)
		}
	}
	if err := s.ScheduleDelete(t.Context(), &store.ScheduleGetParams{Tenant: "t3", Name: "a"}); !errors.Is(err, idemtype.ErrNotFound) {
		t.Errorf("delete in another tenant: err = %v, want ErrNotFound", err)
	}
}

func join(ss []string) string {
	out := ""
	for _, s := range ss {
		out += s + ","
	}
	return out
}

func testScheduleFired(t *testing.T, s store.Store) {
	upsertSchedule(t, s, "t1", "n", `{}`, at(0))
	steps := []struct {
		when time.Duration
		job  int64
		want bool
	}{
		{10 * time.Minute, 1, true},
		{10 * time.Minute, 2, false}, // the same firing again
		{5 * time.Minute, 3, false},  // an older one (a clock stepped back)
		{15 * time.Minute, 4, true},
		{20 * time.Minute, 0, true}, // a skipped firing keeps the last job
	}
	for _, st := range steps {
		if got := fired(t, s, "n", at(st.when), st.job); got != st.want {
			t.Errorf("fired at +%v: changed %v, want %v", st.when, got, st.want)
		}
	}
	sc := getSchedule(t, s, "t1", "n")
	if !sc.LastFiredAt.Equal(at(20*time.Minute)) || sc.LastJobID != 4 {
		t.Errorf("after firings: last %v job %d, want +20m job 4", sc.LastFiredAt, sc.LastJobID)
	}
	if !fired(t, s, "n", time.Time{}, 9) { // a manual trigger
		t.Errorf("trigger did not record its job")
	}
	sc = getSchedule(t, s, "t1", "n")
	if !sc.LastFiredAt.Equal(at(20*time.Minute)) || sc.LastJobID != 9 {
		t.Errorf("after trigger: last %v job %d, want +20m job 9", sc.LastFiredAt, sc.LastJobID)
	}
	if fired(t, s, "missing", at(time.Hour), 1) {
		t.Errorf("an unknown schedule reported a change")
	}
}

func testScheduleDelete(t *testing.T, s store.Store) {
	upsertSchedule(t, s, "t1", "n", `{}`, at(0))
	j := insert1(t, s, at(0), newJob("made-by-schedule"))
	fired(t, s, "n", at(time.Minute), j.ID)
	if err := s.ScheduleDelete(t.Context(), &store.ScheduleGetParams{Tenant: "t1", Name: "n"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ScheduleGet(t.Context(), &store.ScheduleGetParams{Tenant: "t1", Name: "n"}); !errors.Is(err, idemtype.ErrNotFound) {
		t.Errorf("deleted schedule: err = %v", err)
	}
	mustGet(t, s, j.ID) // the job it made stays
	if err := s.ScheduleDelete(t.Context(), &store.ScheduleGetParams{Tenant: "t1", Name: "n"}); !errors.Is(err, idemtype.ErrNotFound) {
		t.Errorf("second delete: err = %v, want ErrNotFound", err)
	}
}

func testScheduleUpsertRace(t *testing.T, s store.Store) {
	const n = 10
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.ScheduleUpsert(t.Context(), &store.ScheduleUpsertParams{Tenant: "t1", Name: "race", Spec: []byte(`{}`), Now: at(0)})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("concurrent upsert: %v", err)
		}
	}
	list, err := s.ScheduleList(t.Context(), &store.ScheduleListParams{Tenant: "t1"})
	if err != nil || len(list) != 1 {
		t.Errorf("after 10 concurrent upserts: %d schedules (err %v), want 1", len(list), err)
	}
}

func timeoutCases() []testCase {
	return []testCase{
		{"Insert/timeout stored with the job", testInsertTimeout},
	}
}

// testInsertTimeout: a job's own timeout comes back from every insert path
// (plain, keyed, with dependencies), from reads and from claims.
func testInsertTimeout(t *testing.T, s store.Store) {
	plain := newJob("plain")
	plain.Timeout = 1500 * time.Millisecond
	k := keyed("keyed", "k-timeout", hash("a"))
	k.Timeout = time.Minute
	none := newJob("none")
	rows := insertNew(t, s, at(0), plain, k, none)
	dep := newJob("dep")
	dep.DependsOn = []int64{rows[2].ID}
	dep.Timeout = time.Hour
	rows = append(rows, insert1(t, s, at(0), dep))
	want := []time.Duration{1500 * time.Millisecond, time.Minute, 0, time.Hour}
	for i, r := range rows {
		if r.Timeout != want[i] {
			t.Errorf("insert %s: timeout %v, want %v", r.Kind, r.Timeout, want[i])
		}
		if got := mustGet(t, s, r.ID); got.Timeout != want[i] {
			t.Errorf("get %s: timeout %v, want %v", r.Kind, got.Timeout, want[i])
		}
	}
	for _, j := range claim(t, s, at(time.Second), 10, rows[0].Queue) {
		if j.ID == rows[0].ID && j.Timeout != want[0] {
			t.Errorf("claim: timeout %v, want %v", j.Timeout, want[0])
		}
	}
}
