package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/idem-dev/idem/idemclient"
)

// chromium finds the browser: $IDEM_CHROMIUM or chromium on PATH. Without
// it the browser tests skip loudly, or fail when IDEM_REQUIRE_BROWSER=1.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("IDEM_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "BROWSER TESTS NOT RUN: no chromium on PATH (apt-get install -y chromium, or set IDEM_CHROMIUM)"
	if os.Getenv("IDEM_REQUIRE_BROWSER") == "1" {
		t.Fatal(msg + "; IDEM_REQUIRE_BROWSER=1 makes this a failure")
	}
	t.Skip("*** " + msg + " ***")
	return ""
}

// browser starts one headless Chromium for the test, offline and isolated.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Headless,
		chromedp.Flag("disable-quic", true), chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// session is a fresh browser context (own cookies) with a time limit.
func session(t *testing.T, b context.Context) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatal(err)
	}
	ctx, cancelT := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(cancelT)
	return ctx
}

func do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

// text reads the visible text of the first element matching sel in one
// evaluation, so a document replaced between finding the node and reading
// it (a redirect after a POST) cannot fail the read; a miss is a failure.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	q, _ := json.Marshal(sel)
	waitJS(t, ctx, fmt.Sprintf(`document.querySelector(%s) !== null`, q))
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%s) || {innerText: ''}).innerText`, q)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

// waitJS waits until the expression is truthy in the page. A navigation
// under way (after a click that submits a form) restarts the wait in the
// new document.
func waitJS(t *testing.T, ctx context.Context, expr string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(time.Until(deadline))))
		if err == nil {
			return
		}
		if time.Now().Before(deadline) && ctx.Err() == nil && (strings.Contains(err.Error(), "navigated or closed") ||
			strings.Contains(err.Error(), "Cannot find context")) {
			continue
		}
		body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		t.Fatalf("waiting for %s: %v\npage:\n%s", expr, err, body)
	}
}

func signIn(t *testing.T, ctx context.Context, base, key, tenant string) {
	t.Helper()
	do(t, ctx, chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#key")),
		chromedp.SendKeys(chromedp.CSS("#key"), key))
	if tenant != "" {
		do(t, ctx, chromedp.SendKeys(chromedp.CSS("#tenant"), tenant))
	}
	do(t, ctx, chromedp.Click(chromedp.CSS(`button[type=submit]`)))
	waitJS(t, ctx, `document.querySelector('h1') && document.querySelector('h1').textContent === 'Overview'`)
}

// artifacts is where screenshots go: $IDEM_UI_ARTIFACTS or a temp dir.
func artifacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("IDEM_UI_ARTIFACTS")
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func shot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// axeSource is axe-core, vendored for the tests only by ui/vendor.sh.
func axeSource(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "vendor", "axe.min.js"))
	if err != nil {
		t.Fatalf("axe-core missing (run ui/vendor.sh): %v", err)
	}
	return string(b)
}

// checkA11y runs axe-core on the current page and fails on any serious or
// critical violation.
func checkA11y(t *testing.T, ctx context.Context, axe, page string) {
	t.Helper()
	do(t, ctx, chromedp.Evaluate[chromedp.Void](axe))
	out, err := chromedp.Run(ctx, chromedp.Evaluate[string](`axe.run(document, {resultTypes: ['violations']}).then(r =>
		JSON.stringify(r.violations.filter(v => v.impact === 'serious' || v.impact === 'critical')
			.map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))}))))`,
		chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("axe on %s: %v", page, err)
	}
	var v []map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("axe result %q: %v", out, err)
	}
	if len(v) > 0 {
		t.Errorf("axe: %d serious/critical violations on %s: %s", len(v), page, out)
	}
}

func TestBrowser(t *testing.T) {
	b := browser(t)
	e := setup(t)
	base := e.srv.URL
	dir := artifacts(t)
	axe := axeSource(t)

	t.Run("sign-in refuses a wrong key with a message", func(t *testing.T) {
		ctx := session(t, b)
		do(t, ctx, chromedp.Navigate(base+"/ui/jobs"), chromedp.WaitVisible(chromedp.CSS("#key")),
			chromedp.SendKeys(chromedp.CSS("#key"), "idem_nope"), chromedp.Click(chromedp.CSS(`button[type=submit]`)))
		waitJS(t, ctx, `document.querySelector('#login-error') !== null`)
		if got := text(t, ctx, "#login-error"); !strings.Contains(got, "Unknown or revoked") {
			t.Fatalf("login error %q", got)
		}
		checkA11y(t, ctx, axe, "login")
		shot(t, ctx, dir, "login")
	})

	t.Run("overview counts change after enqueues", func(t *testing.T) {
		ctx := session(t, b)
		e.enqueue(e.keyA, "emails", "send", map[string]any{"to": "x@example.com"})
		signIn(t, ctx, base, e.keyA, "")
		waitJS(t, ctx, `document.querySelector('tr[data-queue=emails] td[data-state=available]').textContent.trim() === '1'`)
		for i := range 3 {
			e.enqueue(e.keyA, "emails", "send", map[string]any{"to": fmt.Sprintf("u%d@example.com", i)})
		}
		// htmx polls the live fragment; the page is not reloaded.
		waitJS(t, ctx, `document.querySelector('tr[data-queue=emails] td[data-state=available]').textContent.trim() === '4'`)
		waitJS(t, ctx, `document.querySelector('#chart canvas') !== null`)
		checkA11y(t, ctx, axe, "overview")
		shot(t, ctx, dir, "overview")
	})

	t.Run("job list filters by a value inside args", func(t *testing.T) {
		ctx := session(t, b)
		want := map[string]bool{}
		for i := range 3 {
			want[e.enqueue(e.keyA, "billing", "invoice", map[string]any{"customer": "acme", "n": i})] = true
			e.enqueue(e.keyA, "billing", "invoice", map[string]any{"customer": "globex", "n": i})
		}
		signIn(t, ctx, base, e.keyA, "")
		do(t, ctx, chromedp.Navigate(base+"/ui/jobs?queue=billing"), chromedp.WaitVisible(chromedp.CSS("#f-args")),
			chromedp.SendKeys(chromedp.CSS("#f-args"), "customer=acme"),
			chromedp.Click(chromedp.CSS(`form.filters button[type=submit]`)))
		// The new page's URL is set before its rows are parsed: wait for
		// the document to finish loading (and rows to be there).
		waitJS(t, ctx, `location.search.includes('args=customer') && document.readyState === 'complete' && document.querySelector('tr[data-job]') !== null`)
		ids, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('tr[data-job]')].map(r => r.dataset.job)`))
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) != len(want) {
			t.Fatalf("rows %v, want the %d acme jobs", ids, len(want))
		}
		for _, id := range ids {
			if !want[id] {
				t.Fatalf("job %s is not an acme job", id)
			}
		}
		checkA11y(t, ctx, axe, "jobs")
		shot(t, ctx, dir, "jobs")
		do(t, ctx, chromedp.Click(chromedp.CSS("#sel-"+ids[0])), chromedp.Click(chromedp.CSS("#sel-"+ids[1])),
			chromedp.Click(chromedp.CSS(`button[value=cancel]`)))
		waitJS(t, ctx, `document.querySelector('.msg.ok') !== null`)
		if got := text(t, ctx, ".msg.ok"); !strings.Contains(got, "Cancelled 2 of 2") {
			t.Fatalf("bulk cancel: %q", got)
		}
		if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('tr[data-job] .st-cancelled').length`)); err != nil || n != 2 {
			t.Fatalf("cancelled rows after bulk cancel: %d %v", n, err)
		}
	})

	t.Run("bad filter input is a message, not an error page", func(t *testing.T) {
		ctx := session(t, b)
		signIn(t, ctx, base, e.keyA, "")
		do(t, ctx, chromedp.Navigate(base+"/ui/jobs?since=yesterday&args=noequals&limit=0&state=lost"))
		waitJS(t, ctx, `document.querySelector('.msg.error') !== null`)
		msg := text(t, ctx, ".msg.error")
		for _, want := range []string{"Created from", "Args value", "Page size", "State"} {
			if !strings.Contains(msg, want) {
				t.Errorf("message %q lacks %q", msg, want)
			}
		}
		do(t, ctx, chromedp.Navigate(base+"/ui/jobs/abc"))
		waitJS(t, ctx, `document.querySelector('.msg.error') !== null`)
		if got := text(t, ctx, ".msg.error"); !strings.Contains(got, "not a job id") {
			t.Errorf("job abc: %q", got)
		}
		checkA11y(t, ctx, axe, "error")
	})

	t.Run("dead job: attempts, requeue from the DLQ, completes", func(t *testing.T) {
		ctx := session(t, b)
		id := e.dead(e.keyA, "payments")
		signIn(t, ctx, base, e.keyA, "")
		do(t, ctx, chromedp.Navigate(base+"/ui/jobs/"+id))
		waitJS(t, ctx, `document.querySelectorAll('ol.timeline li.attempt').length === 2`)
		if got := text(t, ctx, "ol.timeline"); !strings.Contains(got, "connection refused") || !strings.Contains(got, "charge.go:42") {
			t.Fatalf("attempts %q lack the errors", got)
		}
		checkA11y(t, ctx, axe, "job")
		shot(t, ctx, dir, "job")

		wctx, stop := context.WithCancel(context.Background())
		t.Cleanup(stop)
		done := e.worker(wctx, e.keyA, "payments")
		do(t, ctx, chromedp.Navigate(base+"/ui/dlq"))
		waitJS(t, ctx, fmt.Sprintf(`document.querySelector('#sel-%s') !== null`, id))
		checkA11y(t, ctx, axe, "dlq")
		shot(t, ctx, dir, "dlq")
		do(t, ctx, chromedp.Click(chromedp.CSS("#sel-"+id)),
			chromedp.Click(chromedp.CSS(`button[value=requeue]`)))
		waitJS(t, ctx, `document.querySelector('.msg.ok') !== null`)
		if got := text(t, ctx, ".msg.ok"); !strings.Contains(got, "Requeued 1 of 1") {
			t.Fatalf("flash %q", got)
		}
		select {
		case got := <-done:
			if got != id {
				t.Fatalf("worker completed %s, want %s", got, id)
			}
		case <-ctx.Done():
			t.Fatal("the requeued job never completed")
		}
		do(t, ctx, chromedp.Navigate(base+"/ui/jobs/"+id))
		waitJS(t, ctx, `document.querySelector('.lead .state').textContent === 'completed'`)

		// Replay makes a copy whose metadata points back to the original.
		do(t, ctx, chromedp.Click(chromedp.CSS(`form[action$="/replay"] button`)))
		waitJS(t, ctx, `document.querySelector('.msg.ok') !== null`)
		if got := text(t, ctx, ".msg.ok"); !strings.Contains(got, "1 new job") {
			t.Fatalf("replay: %q", got)
		}
		do(t, ctx, chromedp.Navigate(base+"/ui/jobs?meta=replay_of%3D"+id))
		waitJS(t, ctx, `document.querySelectorAll('tr[data-job]').length === 1`)
		do(t, ctx, chromedp.Click(chromedp.CSS(`tr[data-job] a`)))
		waitJS(t, ctx, `document.querySelector('dl.facts') !== null && document.querySelector('dl.facts').textContent.includes('Replay of')`)
	})

	t.Run("requeue by filter shows the count first", func(t *testing.T) {
		ctx := session(t, b)
		e.dead(e.keyA, "exports")
		signIn(t, ctx, base, e.keyA, "")
		do(t, ctx, chromedp.Navigate(base+"/ui/dlq/requeue?queue=exports"))
		waitJS(t, ctx, `document.querySelector('#confirm-count') !== null`)
		if got := text(t, ctx, "#confirm-count"); !strings.Contains(got, "requeues 1 dead job") {
			t.Fatalf("confirmation %q", got)
		}
		checkA11y(t, ctx, axe, "dlq-confirm")
		shot(t, ctx, dir, "dlq-confirm")
		do(t, ctx, chromedp.Click(chromedp.CSS(`form.card button[type=submit]`)))
		waitJS(t, ctx, `document.querySelector('.msg.ok') !== null && document.querySelector('.msg.ok').textContent.includes('Requeued 1 dead jobs')`)
	})

	t.Run("result cache page and key lookup", func(t *testing.T) {
		ctx := session(t, b)
		signIn(t, ctx, base, e.keyA, "")
		do(t, ctx, chromedp.Navigate(base+"/ui/cache?key=dead-payments"))
		waitJS(t, ctx, `document.querySelector('#record') !== null`)
		checkA11y(t, ctx, axe, "cache")
		shot(t, ctx, dir, "cache")
		do(t, ctx, chromedp.Navigate(base+"/ui/cache?key=nope"))
		waitJS(t, ctx, `document.querySelector('#key-error') !== null`)
	})

	t.Run("schedules page lists a schedule and Trigger now makes a job", func(t *testing.T) {
		ctx := session(t, b)
		every := "1h"
		if _, err := e.api(e.keyA).PutSchedule(context.Background(), "hourly-sync", &idemclient.ScheduleRequest{
			Every: &every, Queue: "sync", Kind: "pull-crm"}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.api(e.keyA).PutSchedule(context.Background(), "nightly-report", &idemclient.ScheduleRequest{
			Cron: "30 2 * * *", Timezone: "Europe/Paris", Queue: "reports", Kind: "build", Missed: "catch_up"}); err != nil {
			t.Fatal(err)
		}
		signIn(t, ctx, base, e.keyA, "")
		do(t, ctx, chromedp.Click(chromedp.CSS(`nav a[href="/ui/schedules"]`)))
		waitJS(t, ctx, `document.querySelector('tr[data-schedule=hourly-sync] td.next') !== null`)
		if got := text(t, ctx, "tr[data-schedule=hourly-sync] td.next"); got == "—" || got == "" {
			t.Fatalf("next firing %q", got)
		}
		checkA11y(t, ctx, axe, "schedules")
		do(t, ctx, chromedp.Click(chromedp.CSS(`tr[data-schedule=hourly-sync] button`)))
		waitJS(t, ctx, `document.querySelector('#fired a') !== null`)
		if got := text(t, ctx, "#fired"); !strings.Contains(got, "hourly-sync fired now") {
			t.Fatalf("flash %q", got)
		}
		shot(t, ctx, dir, "schedules")
		// The page reloads by URL and keeps the last run's link.
		do(t, ctx, chromedp.Reload())
		waitJS(t, ctx, `document.querySelector('tr[data-schedule=hourly-sync] td.last a') !== null`)
		do(t, ctx, chromedp.Click(chromedp.CSS(`tr[data-schedule=hourly-sync] td.last a`)))
		waitJS(t, ctx, `document.querySelector('.lead .state') !== null && location.pathname.startsWith('/ui/jobs/')`)
		if got := text(t, ctx, "main"); !strings.Contains(got, "pull-crm") || !strings.Contains(got, "sync") {
			t.Fatalf("job page of the triggered job:\n%s", got)
		}
		id, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.pathname.split('/').pop()`))
		if err != nil {
			t.Fatal(err)
		}
		if j, err := e.api(e.keyA).GetJob(context.Background(), id); err != nil || j.Kind != "pull-crm" {
			t.Fatalf("job %s: %+v %v", id, j, err)
		}
	})

	t.Run("limits page shows usage; Pause then Resume changes /v1/stats", func(t *testing.T) {
		ctx := session(t, b)
		bg := context.Background()
		// A day's window: with a minute's, a minute boundary between the
		// API's reading and the page's render showed the page a new, empty
		// window ("used 0") and failed a CI run.
		rate, conc := "20/24h", 1
		if _, err := e.api(e.admin).LimitPut(bg, idemclient.LimitScope{Queue: "mailer"},
			idemclient.LimitRequest{Rate: &rate, Concurrency: &conc}); err != nil {
			t.Fatal(err)
		}
		weight := 3
		if _, err := e.api(e.admin).LimitPut(bg, idemclient.LimitScope{Tenant: "a"},
			idemclient.LimitRequest{Weight: &weight}); err != nil {
			t.Fatal(err)
		}
		e.enqueue(e.keyA, "mailer", "send", map[string]any{"n": 1})
		e.enqueue(e.keyA, "mailer", "send", map[string]any{"n": 2})
		// Concurrency 1: one job runs, the claim leaves the other behind.
		jobs, err := e.api(e.keyA).Claim(bg, &idemclient.ClaimRequest{Queues: []string{"mailer"}, WorkerID: "w-limits", Limit: 2})
		if err != nil || len(jobs) != 1 {
			t.Fatalf("claim under concurrency 1: %d jobs, %v", len(jobs), err)
		}
		want, err := e.api(e.admin).LimitGet(bg, idemclient.LimitScope{Queue: "mailer"})
		if err != nil || want.Usage.Running != 1 || want.Usage.WindowUsed != 1 {
			t.Fatalf("API usage %+v %v", want, err)
		}
		signIn(t, ctx, base, e.admin, "")
		do(t, ctx, chromedp.Click(chromedp.CSS(`nav a[href="/ui/limits"]`)))
		row := `tr[data-queue=mailer][data-tenant=""]`
		waitJS(t, ctx, `document.querySelector('`+row+`') !== null`)
		for sel, w := range map[string]string{"td.running": "1 / 1", "td.used": "1",
			"td.throttled": fmt.Sprint(want.Usage.Throttled)} {
			if got := text(t, ctx, row+" "+sel); got != w {
				t.Errorf("%s = %q, want %q (the API's)", sel, got, w)
			}
		}
		checkA11y(t, ctx, axe, "limits")

		paused := func() []string {
			st, err := e.api(e.admin).Stats(bg)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, p := range st.Paused {
				out = append(out, p.Queue+"/"+p.Tenant)
			}
			return out
		}
		if p := paused(); len(p) != 0 {
			t.Fatalf("paused before: %v", p)
		}
		do(t, ctx, chromedp.SendKeys(chromedp.CSS("#p-queue"), "mailer"), chromedp.Click(chromedp.CSS("#pause")))
		waitJS(t, ctx, `document.querySelector('.msg.ok') !== null && document.querySelector('tr[data-paused=mailer]') !== null`)
		if p := paused(); len(p) != 1 || p[0] != "mailer/" {
			t.Fatalf("/v1/stats paused after Pause: %v", p)
		}
		shot(t, ctx, dir, "limits")
		do(t, ctx, chromedp.Click(chromedp.CSS(`tr[data-paused=mailer] button`)))
		waitJS(t, ctx, `document.querySelector('#none-paused') !== null`)
		if got := text(t, ctx, ".msg.ok"); !strings.Contains(got, "Resumed queue mailer") {
			t.Fatalf("resume flash %q", got)
		}
		if p := paused(); len(p) != 0 {
			t.Fatalf("/v1/stats paused after Resume: %v", p)
		}
	})

	t.Run("a tenant key's refused pause is a visible message", func(t *testing.T) {
		ctx := session(t, b)
		signIn(t, ctx, base, e.keyA, "")
		do(t, ctx, chromedp.Navigate(base+"/ui/limits"), chromedp.WaitVisible(chromedp.CSS("#p-queue")),
			chromedp.SendKeys(chromedp.CSS("#p-queue"), "mailer"), chromedp.SendKeys(chromedp.CSS("#p-tenant"), "b"),
			chromedp.Click(chromedp.CSS("#pause")))
		waitJS(t, ctx, `document.querySelector('.msg.error') !== null`)
		if got := text(t, ctx, ".msg.error"); !strings.Contains(got, "Not allowed with this key") {
			t.Fatalf("refusal %q", got)
		}
		checkA11y(t, ctx, axe, "limits-refused")
	})

	t.Run("a tenant key sees no other tenant's jobs on any page", func(t *testing.T) {
		ctx := session(t, b)
		secret := e.enqueue(e.keyB, "secret-queue", "secret-kind", map[string]any{"secret": "b-only"})
		deadB := e.dead(e.keyB, "b-dead")
		signIn(t, ctx, base, e.keyA, "")
		for _, p := range []string{"/ui/", "/ui/jobs", "/ui/jobs?queue=secret-queue", "/ui/dlq", "/ui/cache?key=dead-b-dead"} {
			do(t, ctx, chromedp.Navigate(base+p))
			waitJS(t, ctx, `document.querySelector('h1') !== null`)
			body := text(t, ctx, "body")
			for _, leak := range []string{"secret-queue", "secret-kind", "b-only", "b-dead"} {
				if strings.Contains(body, leak) && !strings.Contains(p, leak) {
					t.Errorf("%s shows %q of tenant b", p, leak)
				}
			}
			if strings.Contains(p, "secret-queue") && strings.Contains(body, "invoice") {
				t.Errorf("%s lists jobs", p)
			}
		}
		for _, id := range []string{secret, deadB} {
			do(t, ctx, chromedp.Navigate(base+"/ui/jobs/"+id))
			waitJS(t, ctx, `document.querySelector('.msg.error') !== null`)
			if got := text(t, ctx, ".msg.error"); !strings.Contains(got, "does not exist in this tenant") {
				t.Errorf("job %s of tenant b: %q", id, got)
			}
		}
		// A tenant key cannot switch tenant at sign-in either.
		ctx2 := session(t, b)
		do(t, ctx2, chromedp.Navigate(base+"/ui/login"), chromedp.WaitVisible(chromedp.CSS("#key")),
			chromedp.SendKeys(chromedp.CSS("#key"), e.keyA), chromedp.SendKeys(chromedp.CSS("#tenant"), "b"),
			chromedp.Click(chromedp.CSS(`button[type=submit]`)))
		waitJS(t, ctx2, `document.querySelector('#login-error') !== null`)
		if got := text(t, ctx2, "#login-error"); !strings.Contains(got, "own tenant") {
			t.Errorf("switch refused with %q", got)
		}
	})

	t.Run("an admin key switches tenant", func(t *testing.T) {
		ctx := session(t, b)
		signIn(t, ctx, base, e.admin, "b")
		waitJS(t, ctx, `document.querySelector('tr[data-queue=secret-queue]') !== null`)
		waitJS(t, ctx, `document.querySelector('table.checks') !== null`)
		shot(t, ctx, dir, "overview-admin")
	})

	t.Run("a forged cross-site POST is refused", func(t *testing.T) {
		ctx := session(t, b)
		id := e.enqueue(e.keyA, "forgery", "victim", map[string]any{})
		signIn(t, ctx, base, e.keyA, "")
		evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, `<form id="f" method="post" action="%s/ui/jobs/%s/cancel"><input name="csrf" value="guess"></form>
				<script>document.getElementById('f').submit()</script>`, base, id)
		}))
		t.Cleanup(evil.Close)
		do(t, ctx, chromedp.Navigate(evil.URL))
		waitJS(t, ctx, `location.href.includes('/ui/jobs/')`)
		waitJS(t, ctx, `document.querySelector('.msg.error') !== null`)
		if got := text(t, ctx, ".msg.error"); !strings.Contains(got, "refused") && !strings.Contains(got, "Sign in") {
			t.Errorf("forged POST answered %q", got)
		}
		j, err := e.api(e.keyA).GetJob(context.Background(), id)
		if err != nil || j.State != "available" {
			t.Fatalf("job after forged cancel: %+v %v, want still available", j, err)
		}
	})

	t.Run("phone width", func(t *testing.T) {
		ctx := session(t, b)
		signIn(t, ctx, base, e.keyA, "")
		do(t, ctx, chromedp.EmulateViewport(390, 844), chromedp.Navigate(base+"/ui/jobs"))
		waitJS(t, ctx, `document.querySelector('form.filters') !== null`)
		w, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
		if err != nil {
			t.Fatal(err)
		}
		if w > 400 {
			t.Errorf("page is %d px wide at a 390 px viewport", w)
		}
		shot(t, ctx, dir, "jobs-phone")
	})
	t.Logf("screenshots in %s", dir)
}
