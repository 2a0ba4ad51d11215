package ui_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/idem-dev/idem/idemclient"
)

// kill enqueues a job of kind in queue that dies on its only attempt and
// returns its id.
func (e *env) kill(key, queue, kind string) string {
	e.t.Helper()
	ctx := context.Background()
	cl := e.api(key)
	res, err := cl.Enqueue(ctx, &idemclient.EnqueueRequest{Queue: queue, Kind: kind, MaxAttempts: 1})
	if err != nil {
		e.t.Fatal(err)
	}
	jobs, err := cl.Claim(ctx, &idemclient.ClaimRequest{Queues: []string{queue}, WorkerID: "w-pages"})
	if err != nil || len(jobs) != 1 || jobs[0].ID != res.Job.ID {
		e.t.Fatalf("claim: %v %v", jobs, err)
	}
	if _, err := cl.Fail(ctx, jobs[0].ID, jobs[0].LeaseToken, &idemclient.FailRequest{Error: "boom " + kind}); err != nil {
		e.t.Fatal(err)
	}
	return res.Job.ID
}

// state returns the state of job id as key sees it ("" when not found).
func (e *env) state(key, id string) string {
	e.t.Helper()
	j, err := e.api(key).GetJob(context.Background(), id)
	if err != nil {
		return ""
	}
	return j.State
}

func TestJobsPage(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.login(e.keyA)
	mail := e.enqueue(e.keyA, "mail", "send", map[string]any{"to": "ada@example.com"})
	sms := e.enqueue(e.keyA, "sms", "text", map[string]any{})
	other := e.enqueue(e.keyB, "mail", "send", map[string]any{"to": "b@example.com"})

	t.Run("lists the tenant's jobs only", func(t *testing.T) {
		page := body(t, e.get("/ui/jobs", a))
		if !strings.Contains(page, "/ui/jobs/"+mail) || !strings.Contains(page, "/ui/jobs/"+sms) {
			t.Errorf("jobs missing:\n%s", page)
		}
		if strings.Contains(page, "/ui/jobs/"+other+`"`) {
			t.Errorf("tenant b's job %s on tenant a's page", other)
		}
	})
	t.Run("filters by queue", func(t *testing.T) {
		page := body(t, e.get("/ui/jobs?queue=sms", a))
		if !strings.Contains(page, "/ui/jobs/"+sms) || strings.Contains(page, `href="/ui/jobs/`+mail+`"`) {
			t.Errorf("queue filter:\n%s", page)
		}
	})
	t.Run("a bad filter is a 400 with a message", func(t *testing.T) {
		res := e.get("/ui/jobs?state=finished", a)
		if page := body(t, res); res.StatusCode != http.StatusBadRequest || !strings.Contains(page, "finished") {
			t.Errorf("%d:\n%s", res.StatusCode, page)
		}
	})
	t.Run("job detail", func(t *testing.T) {
		page := body(t, e.get("/ui/jobs/"+mail, a))
		for _, want := range []string{"send", "mail", "ada@example.com", "available"} {
			if !strings.Contains(page, want) {
				t.Errorf("detail lacks %q", want)
			}
		}
	})
	t.Run("another tenant's job is not found", func(t *testing.T) {
		res := e.get("/ui/jobs/"+other, a)
		if page := body(t, res); res.StatusCode != http.StatusNotFound || !strings.Contains(page, "does not exist in this tenant") {
			t.Errorf("%d:\n%s", res.StatusCode, page)
		}
	})
	t.Run("a job id that is not a number", func(t *testing.T) {
		res := e.get("/ui/jobs/abc", a)
		if page := body(t, res); res.StatusCode != http.StatusBadRequest || !strings.Contains(page, "not a job id") {
			t.Errorf("%d:\n%s", res.StatusCode, page)
		}
	})
}

func TestJobsBulkActions(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.login(e.keyA)
	x := e.enqueue(e.keyA, "q", "k", map[string]any{"n": 1})
	y := e.enqueue(e.keyA, "q", "k", map[string]any{"n": 2})
	theirs := e.enqueue(e.keyB, "q", "k", map[string]any{})
	token := e.csrf("/ui/jobs", a)

	page := e.submit(t, "/ui/jobs/bulk", url.Values{"csrf": {token}, "action": {"cancel"}, "id": {x, y}}, a)
	if !strings.Contains(page, "Cancelled 2 of 2 jobs.") {
		t.Fatalf("bulk cancel:\n%s", page)
	}
	if e.state(e.keyA, x) != "cancelled" || e.state(e.keyA, y) != "cancelled" {
		t.Fatal("jobs not cancelled")
	}
	// Cancelling again: each refusal is named, nothing else happens.
	page = e.submit(t, "/ui/jobs/bulk", url.Values{"csrf": {token}, "action": {"cancel"}, "id": {x, theirs}}, a)
	if !strings.Contains(page, "Cancelled 0 of 2 jobs. Not done: job "+x) || !strings.Contains(page, "job "+theirs) {
		t.Fatalf("partial failure:\n%s", page)
	}
	if e.state(e.keyB, theirs) != "available" {
		t.Fatal("tenant a cancelled tenant b's job")
	}
	page = e.submit(t, "/ui/jobs/bulk", url.Values{"csrf": {token}, "action": {"retry"}, "id": {y}}, a)
	if !strings.Contains(page, "Retried 1 of 1 jobs.") || e.state(e.keyA, y) != "available" {
		t.Fatalf("bulk retry:\n%s", page)
	}
	for _, tc := range []struct {
		form url.Values
		want string
	}{
		{url.Values{"csrf": {token}, "action": {"cancel"}}, "Select at least one job first."},
		{url.Values{"csrf": {token}, "action": {"delete"}, "id": {x}}, "Choose Cancel or Retry."},
	} {
		if page := e.submit(t, "/ui/jobs/bulk", tc.form, a); !strings.Contains(page, tc.want) {
			t.Errorf("%v: page lacks %q", tc.form, tc.want)
		}
	}
}

// TestFormsReturnInsideTheDashboard: a form's return address never leads
// out of the dashboard (no open redirect).
func TestFormsReturnInsideTheDashboard(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.login(e.keyA)
	token := e.csrf("/ui/jobs", a)
	for ret, want := range map[string]string{
		"/ui/jobs?queue=q":         "/ui/jobs?queue=q",
		"https://evil.example/ui/": "/ui/",
		"//evil.example/ui/":       "/ui/",
		"/ui/\\evil":               "/ui/",
		"/v1/jobs":                 "/ui/",
		"/ui//evil.example":        "/ui/evil.example", // cleaned, still on this host
	} {
		res := e.post("/ui/jobs/bulk", url.Values{"csrf": {token}, "action": {"cancel"}, "return": {ret}}, e.sameOrigin(), a)
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != want {
			t.Errorf("return %q: %d to %q, want %q", ret, res.StatusCode, res.Header.Get("Location"), want)
		}
	}
}

func TestJobActions(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.login(e.keyA)
	ctx := context.Background()
	res, err := e.api(e.keyA).Enqueue(ctx, &idemclient.EnqueueRequest{Queue: "q", Kind: "k", IdempotencyKey: "order-1"})
	if err != nil {
		t.Fatal(err)
	}
	keyed := res.Job.ID
	token := e.csrf("/ui/jobs/"+keyed, a)
	act := func(id, action string) string {
		t.Helper()
		return e.submit(t, "/ui/jobs/"+id+"/"+action, url.Values{"csrf": {token}}, a)
	}

	if page := act(keyed, "cancel"); !strings.Contains(page, "Job "+keyed+" cancelled.") || e.state(e.keyA, keyed) != "cancelled" {
		t.Fatalf("cancel:\n%s", page)
	}
	if page := act(keyed, "cancel"); !strings.Contains(page, "Not done: ") {
		t.Fatalf("cancel twice:\n%s", page)
	}
	if page := act(keyed, "replay"); !strings.Contains(page, "Replayed: 1 new job(s) enqueued as copies.") {
		t.Fatalf("replay:\n%s", page)
	}
	list, err := e.api(e.keyA).ListJobs(ctx, &idemclient.ListParams{Filter: idemclient.Filter{Kind: "k"}})
	if err != nil || len(list.Jobs) != 2 {
		t.Fatalf("after replay %d jobs of kind k: %v", len(list.Jobs), err)
	}
	copyID := list.Jobs[0].ID
	if page := body(t, e.get("/ui/jobs/"+copyID, a)); !strings.Contains(page, keyed) {
		t.Errorf("the copy's page does not name the original %s:\n%s", keyed, page)
	}
	if page := act(keyed, "retry"); !strings.Contains(page, "will run again") || e.state(e.keyA, keyed) != "available" {
		t.Fatalf("retry:\n%s", page)
	}
	// A replay copies finished jobs only: an unfinished job's page offers
	// none, and a replay posted anyway says why nothing was copied.
	if page := body(t, e.get("/ui/jobs/"+keyed, a)); strings.Contains(page, "Replay as a new job") || !strings.Contains(page, "has not finished") {
		t.Errorf("the page of an available job offers a replay:\n%s", page)
	}
	if page := act(keyed, "replay"); !strings.Contains(page, "Not done: ") || !strings.Contains(page, "has not finished") {
		t.Fatalf("replay of an unfinished job:\n%s", page)
	}
	r := e.post("/ui/jobs/"+keyed+"/explode", url.Values{"csrf": {token}}, e.sameOrigin(), a)
	if r.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown action: %d", r.StatusCode)
	}
}

func TestDLQPage(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.login(e.keyA)
	charge1 := e.kill(e.keyA, "billing", "charge")
	charge2 := e.kill(e.keyA, "billing", "charge")
	refund := e.kill(e.keyA, "billing", "refund")
	mail := e.kill(e.keyA, "mail", "send")
	e.kill(e.keyB, "billing", "charge") // another tenant's

	t.Run("groups by queue and kind", func(t *testing.T) {
		page := body(t, e.get("/ui/dlq", a))
		for _, want := range []string{
			`<a href="/ui/dlq?queue=billing&amp;kind=charge">charge</a></td><td>2</td>`,
			`<a href="/ui/dlq?queue=billing&amp;kind=refund">refund</a></td><td>1</td>`,
			`<a href="/ui/dlq?queue=mail&amp;kind=send">send</a></td><td>1</td>`,
		} {
			if !strings.Contains(page, want) {
				t.Errorf("page lacks %s:\n%s", want, page)
			}
		}
	})
	t.Run("the confirmation counts what a filter requeues", func(t *testing.T) {
		page := body(t, e.get("/ui/dlq/requeue?queue=billing&kind=charge", a))
		if !strings.Contains(page, "This requeues <strong>2</strong> dead job(s)") {
			t.Errorf("confirm:\n%s", page)
		}
		res := e.get("/ui/dlq/requeue", a)
		if page := body(t, res); res.StatusCode != http.StatusBadRequest || !strings.Contains(page, "Choose a queue or a kind") {
			t.Errorf("confirm without a filter: %d\n%s", res.StatusCode, page)
		}
	})
	token := e.csrf("/ui/dlq", a)
	t.Run("requeue by filter", func(t *testing.T) {
		page := e.submit(t, "/ui/dlq/requeue", url.Values{"csrf": {token}, "queue": {"billing"}, "kind": {"charge"}}, a)
		if !strings.Contains(page, "Requeued 2 dead jobs.") {
			t.Fatalf("requeue:\n%s", page)
		}
		if e.state(e.keyA, charge1) != "available" || e.state(e.keyA, charge2) != "available" || e.state(e.keyA, refund) != "dead" {
			t.Fatal("the filter requeued the wrong jobs")
		}
		// Tenant b's dead charge is untouched.
		page = body(t, e.get("/ui/dlq", e.login(e.keyB)))
		if !strings.Contains(page, `kind=charge">charge</a></td><td>1</td>`) {
			t.Errorf("tenant b's dead job was requeued:\n%s", page)
		}
		if page := e.submit(t, "/ui/dlq/requeue", url.Values{"csrf": {token}}, a); !strings.Contains(page, "Choose a queue or a kind.") {
			t.Errorf("requeue without a filter:\n%s", page)
		}
	})
	t.Run("requeue and delete selected", func(t *testing.T) {
		page := e.submit(t, "/ui/dlq/selected", url.Values{"csrf": {token}, "action": {"requeue"}, "id": {refund}}, a)
		if !strings.Contains(page, "Requeued 1 of 1 selected jobs.") || e.state(e.keyA, refund) != "available" {
			t.Fatalf("requeue selected:\n%s", page)
		}
		page = e.submit(t, "/ui/dlq/selected", url.Values{"csrf": {token}, "action": {"delete"}, "id": {mail, refund}}, a)
		if !strings.Contains(page, "Deleted 1 of 2. Not deleted: job "+refund) {
			t.Fatalf("delete selected:\n%s", page)
		}
		if e.state(e.keyA, mail) != "" {
			t.Fatal("the deleted job is still there")
		}
		for _, tc := range []struct {
			form url.Values
			want string
		}{
			{url.Values{"csrf": {token}, "action": {"requeue"}}, "Select at least one dead job first."},
			{url.Values{"csrf": {token}, "action": {"resolve"}, "id": {charge1}}, "Choose Requeue or Delete."},
		} {
			if page := e.submit(t, "/ui/dlq/selected", tc.form, a); !strings.Contains(page, tc.want) {
				t.Errorf("%v: page lacks %q", tc.form, tc.want)
			}
		}
	})
	t.Run("empty", func(t *testing.T) {
		page := body(t, e.get("/ui/dlq", a))
		if strings.Contains(page, "<td>2</td>") {
			t.Errorf("requeued jobs still counted:\n%s", page)
		}
	})
}

func TestOverviewJSON(t *testing.T) {
	t.Parallel()
	e := setup(t)
	a := e.login(e.keyA)
	e.enqueue(e.keyA, "mail", "send", map[string]any{})
	e.enqueue(e.keyA, "mail", "send", map[string]any{"n": 2})
	e.kill(e.keyA, "billing", "charge")
	e.kill(e.keyB, "billing", "charge")
	res := e.get("/ui/overview.json", a)
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("%d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	var v struct {
		Minutes   []int64 `json:"minutes"`
		Completed []int   `json:"completed"`
		Dead      []int   `json:"dead"`
	}
	if err := json.Unmarshal([]byte(body(t, res)), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Minutes) != 60 || len(v.Completed) != 60 || len(v.Dead) != 60 {
		t.Fatalf("series of %d/%d/%d points, want 60 minutes", len(v.Minutes), len(v.Completed), len(v.Dead))
	}
	for i := 1; i < 60; i++ {
		if v.Minutes[i]-v.Minutes[i-1] != 60 {
			t.Fatalf("minutes are not one apart: %v", v.Minutes)
		}
	}
	sum := func(xs []int) (n int) {
		for _, x := range xs {
			n += x
		}
		return n
	}
	// Tenant a's one dead job and no completion; tenant b's are not counted.
	if sum(v.Dead) != 1 || sum(v.Completed) != 0 {
		t.Errorf("dead %d completed %d, want 1 and 0", sum(v.Dead), sum(v.Completed))
	}
	if res := e.get("/ui/overview.json"); res.StatusCode == http.StatusOK {
		t.Error("overview.json without a session")
	}
}
