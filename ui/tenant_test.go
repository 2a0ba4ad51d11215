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

// cookieNamed returns the cookie name set by res (nil when none).
func cookieNamed(res *http.Response, name string) *http.Cookie {
	for _, c := range res.Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// switchTenant posts the tenant form and returns the tenant cookie the
// answer sets (nil when none) and the page it leads to.
func (e *env) switchTenant(t *testing.T, session *http.Cookie, tenant string) (*http.Cookie, string) {
	t.Helper()
	token := e.csrf("/ui/jobs", session)
	res := e.post("/ui/tenant", url.Values{"csrf": {token}, "tenant": {tenant}}, e.sameOrigin(), session)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("switch: %d %s", res.StatusCode, body(t, res))
	}
	cookies := []*http.Cookie{session}
	if f := cookieNamed(res, "idem_flash"); f != nil {
		cookies = append(cookies, f)
	}
	tc := cookieNamed(res, "idem_tenant")
	if tc != nil && tc.MaxAge >= 0 {
		cookies = append(cookies, tc)
	}
	return tc, body(t, e.get(res.Header.Get("Location"), cookies...))
}

func TestAdminSwitchesTenant(t *testing.T) {
	t.Parallel()
	e := setup(t)
	mine := e.enqueue(e.admin, "q", "home-kind", map[string]any{})
	theirs := e.enqueue(e.keyA, "q", "tenant-a-kind", map[string]any{})
	admin := e.login(e.admin)

	page := body(t, e.get("/ui/jobs", admin))
	if !strings.Contains(page, "/ui/jobs/"+mine) || strings.Contains(page, "tenant-a-kind") {
		t.Fatalf("admin in the default tenant (job %s):\n%s", mine, page)
	}
	tc, _ := e.switchTenant(t, admin, "a")
	if tc == nil || tc.Value != "a" || !tc.HttpOnly {
		t.Fatalf("tenant cookie %+v", tc)
	}
	page = body(t, e.get("/ui/jobs", admin, tc))
	if !strings.Contains(page, "/ui/jobs/"+theirs) || strings.Contains(page, "home-kind") {
		t.Fatalf("admin acting in tenant a:\n%s", page)
	}
	// Clearing the tenant goes back to the key's own.
	cleared, _ := e.switchTenant(t, admin, "")
	if cleared == nil || cleared.MaxAge >= 0 {
		t.Fatalf("clearing did not expire the cookie: %+v", cleared)
	}
	// A name the API refuses is a message, and no cookie.
	tc, page = e.switchTenant(t, admin, "bad tenant!")
	if tc != nil || !strings.Contains(page, "Tenant bad tenant!") {
		t.Fatalf("bad tenant: cookie %+v\n%s", tc, page)
	}
}

func TestTenantKeyCannotSwitch(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.enqueue(e.keyB, "q", "tenant-b-kind", map[string]any{})
	a := e.login(e.keyA)
	tc, page := e.switchTenant(t, a, "b")
	if tc != nil || !strings.Contains(page, "Only admin keys can switch tenant") {
		t.Fatalf("tenant key switched: cookie %+v\n%s", tc, page)
	}
	// A forged tenant cookie does not widen a tenant key either.
	page = body(t, e.get("/ui/jobs", a, &http.Cookie{Name: "idem_tenant", Value: "b"}))
	if strings.Contains(page, "tenant-b-kind") {
		t.Fatalf("tenant a's key sees tenant b's job with a forged cookie:\n%s", page)
	}
}

func TestCachePage(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	cl := e.api(e.keyA)
	if _, err := cl.Enqueue(ctx, &idemclient.EnqueueRequest{Queue: "q", Kind: "k", IdempotencyKey: "order-77"}); err != nil {
		t.Fatal(err)
	}
	jobs, err := cl.Claim(ctx, &idemclient.ClaimRequest{Queues: []string{"q"}, WorkerID: "w"})
	if err != nil || len(jobs) != 1 {
		t.Fatal(jobs, err)
	}
	if _, err := cl.Complete(ctx, jobs[0].ID, jobs[0].LeaseToken, json.RawMessage(`{"total":77}`)); err != nil {
		t.Fatal(err)
	}
	a, b := e.login(e.keyA), e.login(e.keyB)

	page := body(t, e.get("/ui/cache?key=order-77", a))
	for _, want := range []string{"order-77", "completed", "/ui/jobs/" + jobs[0].ID} {
		if !strings.Contains(page, want) {
			t.Errorf("cache page lacks %q:\n%s", want, page)
		}
	}
	res := e.get("/ui/cache?key=order-77", b)
	if page := body(t, res); res.StatusCode != http.StatusNotFound || !strings.Contains(page, "No record for key order-77 in this tenant.") {
		t.Errorf("another tenant's key: %d\n%s", res.StatusCode, page)
	}
	res = e.get("/ui/cache", a)
	if page := body(t, res); res.StatusCode != http.StatusOK || strings.Contains(page, "Enter a key") {
		t.Errorf("the page without a lookup: %d", res.StatusCode)
	}
}
