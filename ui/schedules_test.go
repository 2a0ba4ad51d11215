package ui_test

import (
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/idem-dev/idem/idemclient"
	"github.com/idem-dev/idem/idemtype"
)

func TestSchedulesPage(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	if _, err := e.api(e.keyA).PutSchedule(ctx, "nightly-report", &idemclient.ScheduleRequest{
		Cron: "30 2 * * *", Timezone: "Europe/Paris", Queue: "reports", Kind: "build"}); err != nil {
		t.Fatal(err)
	}
	every := "15m"
	if _, err := e.api(e.keyB).PutSchedule(ctx, "b-secret", &idemclient.ScheduleRequest{Every: &every, Kind: "b-kind"}); err != nil {
		t.Fatal(err)
	}
	c := e.login(e.keyA)

	t.Run("lists the tenant's schedules with spec, zone and next firing", func(t *testing.T) {
		page := body(t, e.get("/ui/schedules", c))
		for _, want := range []string{"nightly-report", "30 2 * * *", "Europe/Paris", "reports / build", "missed: skip",
			`aria-current="page">Schedules`} {
			if !strings.Contains(page, want) {
				t.Errorf("page lacks %q", want)
			}
		}
		if !regexp.MustCompile(`class="next">\d{4}-\d\d-\d\d \d\d:30:00Z`).MatchString(page) {
			t.Errorf("no next firing at :30 on the page:\n%s", page)
		}
		if strings.Contains(page, "b-secret") || strings.Contains(page, "b-kind") {
			t.Error("tenant a sees tenant b's schedule")
		}
	})

	t.Run("Trigger now enqueues a job and links it", func(t *testing.T) {
		token := e.csrf("/ui/schedules", c)
		page := e.submit(t, "/ui/schedules/nightly-report/trigger", url.Values{"csrf": {token}}, c)
		m := regexp.MustCompile(`id="fired">.*?<a href="/ui/jobs/(\d+)">`).FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no link to the enqueued job:\n%s", page)
		}
		j, err := e.api(e.keyA).GetJob(ctx, m[1])
		if err != nil || j.Queue != "reports" || j.Kind != "build" {
			t.Fatalf("linked job %+v %v, want a reports/build job", j, err)
		}
		// A crafted link naming another job shows no message.
		if page := body(t, e.get("/ui/schedules?triggered=nightly-report&job=999999", c)); strings.Contains(page, `id="fired"`) {
			t.Errorf("a job id the API does not report is shown as fired:\n%s", page)
		}
	})

	t.Run("triggering an unknown schedule is a message", func(t *testing.T) {
		token := e.csrf("/ui/schedules", c)
		page := e.submit(t, "/ui/schedules/b-secret/trigger", url.Values{"csrf": {token}}, c)
		if !strings.Contains(page, `class="msg error"`) || !strings.Contains(page, "b-secret not triggered") {
			t.Fatalf("no error message:\n%s", page)
		}
	})
}

// TestScheduleEditor: the schedules page creates, replaces and deletes
// schedules (seed 004's scheduling UI): a daily build at 03:00 with the
// seed's 1 s → 5 s → 25 s retries over 4 attempts is stored as the API
// would store it; a refused schedule is a message naming what is wrong
// and stores nothing; a tenant deletes only its own schedules.
func TestScheduleEditor(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	c := e.login(e.keyA)
	save := func(form url.Values) string {
		t.Helper()
		form.Set("csrf", e.csrf("/ui/schedules", c))
		return e.submit(t, "/ui/schedules", form, c)
	}

	page := save(url.Values{"name": {"cdp-build"}, "cron": {"0 3 * * *"}, "timezone": {"Europe/Berlin"},
		"grain": {"day"}, "queue": {"scheduled"}, "kind": {"cdp-build"}, "args": {`{"full":true}`},
		"max_attempts": {"4"}, "retry_delays": {"1s, 5s,25s"}})
	if !strings.Contains(page, `class="msg ok"`) || !strings.Contains(page, "Schedule cdp-build saved: next firing") {
		t.Fatalf("no confirmation:\n%s", page)
	}
	sc, err := e.api(e.keyA).GetSchedule(ctx, "cdp-build")
	if err != nil {
		t.Fatal(err)
	}
	if sc.Cron != "0 3 * * *" || sc.Timezone != "Europe/Berlin" || sc.Grain != "day" || sc.Queue != "scheduled" ||
		string(sc.Args) != `{"full":true}` || sc.MaxAttempts != 4 || sc.Retry == nil ||
		strings.Join(sc.Retry.Delays, " ") != "1s 5s 25s" || sc.Retry.Jitter == nil || *sc.Retry.Jitter != 0 {
		t.Fatalf("stored schedule %+v (retry %+v)", sc, sc.Retry)
	}
	if !strings.Contains(page, `<span class="retry">1s, 5s, 25s</span>`) || !strings.Contains(page, "attempts: 4") {
		t.Errorf("the list does not show the retry policy:\n%s", page)
	}

	t.Run("a refused schedule is a message and stores nothing", func(t *testing.T) {
		for _, tc := range []struct {
			form url.Values
			want string
		}{
			{url.Values{"name": {"bad"}, "cron": {"every day"}, "kind": {"k"}}, "cron"},
			{url.Values{"name": {"bad"}, "every": {"1h"}, "kind": {"k"}, "args": {"{"}}, "args: not valid JSON"},
			{url.Values{"name": {"bad"}, "every": {"1h"}, "kind": {"k"}, "retry_delays": {"1s, soon"}}, "retry.delays"},
			{url.Values{"name": {"bad"}, "every": {"1h"}, "kind": {"k"}, "max_attempts": {"four"}}, "max attempts"},
			{url.Values{"every": {"1h"}, "kind": {"k"}}, "name the schedule"},
		} {
			page := save(tc.form)
			if !strings.Contains(page, `class="msg error"`) || !strings.Contains(page, "not saved") || !strings.Contains(page, tc.want) {
				t.Errorf("%v: no error naming %q:\n%s", tc.form, tc.want, page)
			}
		}
		if _, err := e.api(e.keyA).GetSchedule(ctx, "bad"); !errors.Is(err, idemtype.ErrNotFound) {
			t.Errorf("a refused schedule was stored: %v", err)
		}
	})

	t.Run("saving a name again replaces the schedule", func(t *testing.T) {
		save(url.Values{"name": {"cdp-build"}, "every": {"1h"}, "grain": {"hour"}, "kind": {"cdp-build"}})
		sc, err := e.api(e.keyA).GetSchedule(ctx, "cdp-build")
		if err != nil || sc.Cron != "" || sc.Every != "1h0m0s" || sc.Retry != nil {
			t.Fatalf("replaced schedule %+v (%v)", sc, err)
		}
		if list, _ := e.api(e.keyA).ListSchedules(ctx); len(list) != 1 {
			t.Errorf("%d schedules, want the one replaced", len(list))
		}
	})

	t.Run("delete removes only the tenant's own schedule", func(t *testing.T) {
		every := "15m"
		if _, err := e.api(e.keyB).PutSchedule(ctx, "b-sync", &idemclient.ScheduleRequest{Every: &every, Kind: "sync"}); err != nil {
			t.Fatal(err)
		}
		token := e.csrf("/ui/schedules", c)
		page := e.submit(t, "/ui/schedules/b-sync/delete", url.Values{"csrf": {token}}, c)
		if !strings.Contains(page, `class="msg error"`) || !strings.Contains(page, "b-sync not deleted") {
			t.Errorf("deleting another tenant's schedule: no error:\n%s", page)
		}
		if _, err := e.api(e.keyB).GetSchedule(ctx, "b-sync"); err != nil {
			t.Errorf("tenant b's schedule: %v", err)
		}
		page = e.submit(t, "/ui/schedules/cdp-build/delete", url.Values{"csrf": {e.csrf("/ui/schedules", c)}}, c)
		if !strings.Contains(page, "Schedule cdp-build deleted") || strings.Contains(page, `data-schedule="cdp-build"`) {
			t.Errorf("after delete:\n%s", page)
		}
		if _, err := e.api(e.keyA).GetSchedule(ctx, "cdp-build"); !errors.Is(err, idemtype.ErrNotFound) {
			t.Errorf("deleted schedule: %v", err)
		}
	})

	t.Run("a post without the session's token is refused", func(t *testing.T) {
		if res := e.post("/ui/schedules", url.Values{"name": {"x"}, "every": {"1h"}, "kind": {"k"}}, e.sameOrigin(), c); res.StatusCode != http.StatusForbidden {
			t.Errorf("a post without the CSRF token: %d, want 403", res.StatusCode)
		}
		if _, err := e.api(e.keyA).GetSchedule(ctx, "x"); !errors.Is(err, idemtype.ErrNotFound) {
			t.Errorf("a post without CSRF token stored a schedule: %v", err)
		}
	})
}
