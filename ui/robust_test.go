package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/idem-dev/idem/idemclient"
)

// TestStaticBadPathIsNotFound: a static path that is not valid UTF-8 (or
// has a NUL) is a 404, as any missing file; it was a 500.
func TestStaticBadPathIsNotFound(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, p := range []string{"/ui/static/%ff", "/ui/static/app%ff.css", "/ui/static/vendor/%c3%28", "/ui/static/a%00b"} {
		res := e.get(p)
		if res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, res.StatusCode)
		}
	}
	if res := e.get("/ui/static/app.js"); res.StatusCode != http.StatusOK {
		t.Fatalf("GET app.js: %d", res.StatusCode)
	}
}

// TestLongFlashFitsACookie: the one-time message after a form (here a bulk
// cancel where every job fails, and a schedule with a very long name) is
// kept to what a browser stores in one cookie (4096 bytes, name and value):
// a longer cookie is dropped by the browser and the page then showed no
// message at all. The message is cut and says so.
func TestLongFlashFitsACookie(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c := e.login(e.keyA)
	tok := e.csrf("/ui/jobs", c)
	ids := make([]string, 200)
	for i := range ids {
		ids[i] = fmt.Sprint(900000 + i)
	}
	forms := []struct {
		path string
		form url.Values
		want string
	}{
		{"/ui/jobs/bulk", url.Values{"csrf": {tok}, "action": {"cancel"}, "id": ids}, "Cancelled 0 of 200 jobs. Not done: job 900000:"},
		{"/ui/dlq/selected", url.Values{"csrf": {tok}, "action": {"delete"}, "id": ids}, "Deleted 0 of 200. Not deleted: job 900000:"},
		{"/ui/schedules", url.Values{"csrf": {tok}, "name": {strings.Repeat("n", 9000)}, "kind": {"k"}, "every": {"1m"}}, "Schedule nnnn"},
	}
	for _, f := range forms {
		res := e.post(f.path, f.form, e.sameOrigin(), c)
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("POST %s: %d", f.path, res.StatusCode)
		}
		var flash *http.Cookie
		for _, ck := range res.Cookies() {
			if ck.Name == "idem_flash" {
				flash = ck
			}
		}
		if flash == nil {
			t.Fatalf("POST %s: no message cookie", f.path)
		}
		if n := len(flash.Name) + len(flash.Value); n > 4096 {
			t.Fatalf("POST %s: message cookie of %d bytes: a browser drops it", f.path, n)
		}
		page := body(t, e.get(res.Header.Get("Location"), c, flash))
		if !strings.Contains(page, f.want) || !strings.Contains(page, "(message cut)") {
			t.Fatalf("POST %s: page lacks %q and the cut mark:\n%s", f.path, f.want, page[:min(len(page), 3000)])
		}
	}
}

// TestTenantWithCookieSpecialCharacters: an admin who switches to (or signs
// in for) a tenant whose name has a character a cookie cannot hold as it
// is (`;`, `"`, `\`) acts in that tenant. The cookie dropped those bytes,
// so the dashboard then showed, and acted in, another tenant ("xy" for
// "x;y").
func TestTenantWithCookieSpecialCharacters(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for i, tenant := range []string{`x;y`, `x"y`, `x\y`, `x,y`} {
		cl, err := idemclient.New(e.srv.URL, &idemclient.Config{APIKey: e.admin, Tenant: tenant, MaxRetries: -1})
		if err != nil {
			t.Fatal(err)
		}
		kind := fmt.Sprintf("special-kind-%d", i)
		res, err := cl.Enqueue(context.Background(), &idemclient.EnqueueRequest{Queue: "q", Kind: kind})
		if err != nil {
			t.Fatal(err)
		}
		// The look-alike tenant without the character has a job of its own.
		e.enqueue(e.newKey(strings.NewReplacer(";", "", `"`, "", `\`, "", ",", "").Replace(tenant), false), "q", "lookalike", map[string]any{})
		admin := e.login(e.admin)
		tc, _ := e.switchTenant(t, admin, tenant)
		if tc == nil {
			t.Fatalf("%s: no tenant cookie", tenant)
		}
		page := body(t, e.get("/ui/jobs", admin, tc))
		if !strings.Contains(page, "/ui/jobs/"+res.Job.ID+`"`) || strings.Contains(page, "lookalike") {
			t.Fatalf("admin switched to tenant %s sees another tenant's jobs:\n%s", tenant, page)
		}
		if want := template.HTMLEscapeString(tenant); !strings.Contains(page, `name="tenant" value="`+want+`"`) {
			t.Fatalf("header does not name tenant %s:\n%s", tenant, page)
		}
		// Signing in for the tenant does the same.
		sign := e.post("/ui/login", url.Values{"key": {e.admin}, "tenant": {tenant}}, nil, nil)
		if sign.StatusCode != http.StatusSeeOther {
			t.Fatalf("sign in for %s: %d", tenant, sign.StatusCode)
		}
		page = body(t, e.get("/ui/jobs", cookieNamed(sign, "idem_session"), cookieNamed(sign, "idem_tenant")))
		if !strings.Contains(page, "/ui/jobs/"+res.Job.ID+`"`) || strings.Contains(page, "lookalike") {
			t.Fatalf("admin signed in for tenant %s sees another tenant's jobs:\n%s", tenant, page)
		}
	}
}

// TestReplayOfLinksOnlyAJob: the "Replay of" link of the job page comes
// from the job's metadata (replay_of), which any client sets when it
// enqueues: a value that is not a job id is shown as text, not made a
// link to another dashboard page ("../dlq/requeue?queue=billing" led to
// the requeue confirmation of a queue).
func TestReplayOfLinksOnlyAJob(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c := e.login(e.keyA)
	cl := e.api(e.keyA)
	for _, v := range []string{"../dlq/requeue?queue=billing", "../../v1/stats", "12abc"} {
		meta, _ := json.Marshal(map[string]string{"replay_of": v})
		res, err := cl.Enqueue(context.Background(), &idemclient.EnqueueRequest{Queue: "q", Kind: "k", Metadata: meta})
		if err != nil {
			t.Fatal(err)
		}
		page := body(t, e.get("/ui/jobs/"+res.Job.ID, c))
		if i := strings.Index(page, "<dt>Replay of</dt>"); i < 0 || strings.Contains(page[i:], `<dd><a href="/ui/jobs/`+template.HTMLEscapeString(v)) ||
			!strings.Contains(page[i:], template.HTMLEscapeString(v)) {
			t.Fatalf("replay_of %q:\n%s", v, page)
		}
	}
	orig := e.enqueue(e.keyA, "q", "k", map[string]any{})
	meta, _ := json.Marshal(map[string]string{"replay_of": orig})
	res, err := cl.Enqueue(context.Background(), &idemclient.EnqueueRequest{Queue: "q", Kind: "k", Metadata: meta})
	if err != nil {
		t.Fatal(err)
	}
	if page := body(t, e.get("/ui/jobs/"+res.Job.ID, c)); !strings.Contains(page, `<dt>Replay of</dt><dd><a href="/ui/jobs/`+orig+`">job `+orig+`</a>`) {
		t.Fatalf("replay of job %s is not a link:\n%s", orig, page)
	}
}

// TestSignedOutPolling: the overview's polls after the session ended
// (signed out in another tab) do not follow the sign-in redirect. htmx
// followed it and swapped the whole sign-in page into the queue table,
// whose form then signed in to the bare fragment (next=/ui/overview/queues);
// the chart read the page as JSON. Now htmx is told to load the sign-in
// page in place of the page it polls from, and the chart gets a JSON error.
func TestSignedOutPolling(t *testing.T) {
	t.Parallel()
	e := setup(t)
	req, _ := http.NewRequest("GET", e.srv.URL+"/ui/overview/queues", nil)
	req.Header.Set("HX-Request", "true")
	req.Header.Set("HX-Current-URL", e.srv.URL+"/ui/?x=1")
	res, err := (&http.Transport{}).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized || res.Header.Get("HX-Redirect") != "/ui/login?next="+url.QueryEscape("/ui/?x=1") {
		t.Fatalf("htmx poll signed out: %d, HX-Redirect %q, Location %q", res.StatusCode, res.Header.Get("HX-Redirect"), res.Header.Get("Location"))
	}
	res = e.get("/ui/overview.json")
	var msg struct{ Error string }
	if err := json.Unmarshal([]byte(body(t, res)), &msg); err != nil || res.StatusCode != http.StatusUnauthorized || msg.Error == "" ||
		!strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("chart data signed out: %d %q %v", res.StatusCode, res.Header.Get("Content-Type"), err)
	}
	// A page is still sent to sign in, and comes back after.
	if res := e.get("/ui/jobs?queue=q"); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/ui/login?next="+url.QueryEscape("/ui/jobs?queue=q") {
		t.Fatalf("page signed out: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
}

// TestDLQRequeueSelectedSaysWhatItMissed: requeueing selected dead jobs of
// which some are no longer dead (requeued or retried from another tab, or
// by a worker's operator meanwhile) is an error message saying how many
// came back, as `idem dlq requeue ID…` exits 4; it was a success message.
func TestDLQRequeueSelectedSaysWhatItMissed(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.login(e.keyA)
	dead := e.kill(e.keyA, "billing", "charge")
	live := e.enqueue(e.keyA, "billing", "charge", map[string]any{})
	tok := e.csrf("/ui/dlq", a)
	page := e.submit(t, "/ui/dlq/selected", url.Values{"csrf": {tok}, "action": {"requeue"}, "id": {dead, live}}, a)
	if !strings.Contains(page, `<p class="msg error" role="alert">Requeued 1 of 2 selected jobs`) {
		t.Fatalf("requeue of a dead and a live job:\n%s", page)
	}
	if e.state(e.keyA, dead) != "available" {
		t.Fatal("the dead job was not requeued")
	}
}
