package ui_test

import (
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/idem-dev/idem/idemclient"
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
