package ui_test

import (
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/idem-dev/idem/idemclient"
)

func TestLimitsPage(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	rate, conc := "10/1m", 3
	if _, err := e.api(e.admin).LimitPut(ctx, idemclient.LimitScope{Queue: "emails"},
		idemclient.LimitRequest{Rate: &rate, Concurrency: &conc}); err != nil {
		t.Fatal(err)
	}
	admin, tenantA := e.login(e.admin), e.login(e.keyA)

	t.Run("shows a limit with its usage", func(t *testing.T) {
		page := body(t, e.get("/ui/limits", admin))
		for _, want := range []string{"queue emails", "10/1m", `class="running">0 / 3`, `class="used">0`,
			`class="throttled">0`, `aria-current="page">Limits`, "No queue is paused"} {
			if !strings.Contains(page, want) {
				t.Errorf("page lacks %q:\n%s", want, page)
			}
		}
	})

	t.Run("a tenant key sees its own tenant's limits only", func(t *testing.T) {
		for _, tenant := range []string{"a", "b"} {
			w := 2
			if _, err := e.api(e.admin).LimitPut(ctx, idemclient.LimitScope{Tenant: tenant},
				idemclient.LimitRequest{Weight: &w}); err != nil {
				t.Fatal(err)
			}
		}
		page := body(t, e.get("/ui/limits", tenantA))
		if !strings.Contains(page, `<th scope="row">tenant a</th>`) || strings.Contains(page, "tenant b") {
			t.Errorf("tenant a's page shows the wrong limits:\n%s", page)
		}
	})

	t.Run("an admin pauses and resumes a whole queue", func(t *testing.T) {
		token := e.csrf("/ui/limits", admin)
		page := e.submit(t, "/ui/limits/pause", url.Values{"csrf": {token}, "queue": {"emails"}}, admin)
		if !strings.Contains(page, "Paused queue emails.") || !strings.Contains(page, `data-paused="emails"`) {
			t.Fatalf("after pause:\n%s", page)
		}
		st, err := e.api(e.admin).Stats(ctx)
		if err != nil || len(st.Paused) != 1 || st.Paused[0].Queue != "emails" || st.Paused[0].Tenant != "" {
			t.Fatalf("stats paused %+v %v", st.Paused, err)
		}
		page = e.submit(t, "/ui/limits/resume", url.Values{"csrf": {token}, "queue": {"emails"}}, admin)
		if !strings.Contains(page, "Resumed queue emails.") || !strings.Contains(page, "No queue is paused") {
			t.Fatalf("after resume:\n%s", page)
		}
	})

	t.Run("a tenant key acting on another tenant gets the API's refusal", func(t *testing.T) {
		token := e.csrf("/ui/limits", tenantA)
		page := e.submit(t, "/ui/limits/pause", url.Values{"csrf": {token}, "queue": {"emails"}, "tenant": {"b"}}, tenantA)
		if !regexp.MustCompile(`class="msg error" role="alert">Not allowed with this key: a tenant key pauses only its own work`).MatchString(page) {
			t.Fatalf("no refusal message:\n%s", page)
		}
		st, err := e.api(e.admin).Stats(ctx)
		if err != nil || len(st.Paused) != 0 {
			t.Fatalf("something was paused: %+v %v", st.Paused, err)
		}
	})

	t.Run("a tenant key's pause covers its own work only, and says so", func(t *testing.T) {
		token := e.csrf("/ui/limits", tenantA)
		page := e.submit(t, "/ui/limits/pause", url.Values{"csrf": {token}, "queue": {"emails"}}, tenantA)
		if !strings.Contains(page, "Paused tenant a&#39;s work in queue emails only") {
			t.Fatalf("no narrowed-scope message:\n%s", page)
		}
		page = e.submit(t, "/ui/limits/resume", url.Values{"csrf": {token}, "queue": {"emails"}, "tenant": {"a"}}, tenantA)
		if !strings.Contains(page, "Resumed tenant a&#39;s work in queue emails.") {
			t.Fatalf("resume:\n%s", page)
		}
	})

	t.Run("bad input is a message", func(t *testing.T) {
		token := e.csrf("/ui/limits", admin)
		page := e.submit(t, "/ui/limits/pause", url.Values{"csrf": {token}, "queue": {" "}}, admin)
		if !strings.Contains(page, "Name the queue to pause.") {
			t.Fatalf("blank queue:\n%s", page)
		}
		page = e.submit(t, "/ui/limits/pause", url.Values{"csrf": {token}, "queue": {"bad queue"}}, admin)
		if !strings.Contains(page, `class="msg error"`) || !strings.Contains(page, "Nothing paused") {
			t.Fatalf("invalid queue name:\n%s", page)
		}
	})
}
