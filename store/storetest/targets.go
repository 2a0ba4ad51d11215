package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

func targetCases() []testCase {
	return []testCase{
		{"Targets/put-list-replace-delete", testTargetLifecycle},
		{"Targets/invalid", testTargetInvalid},
		{"Targets/delivery-attempts", testAttemptDeliveryList},
		{"Targets/delivery-attempts-carry-their-tenant", testAttemptDeliveryTenant},
		{"Targets/replace-same-instant-not-created", testTargetReplaceSameInstant},
		{"Targets/subscription-and-plain-target-do-not-replace-each-other", testTargetTopicClash},
		{"Targets/keep-secrets-on-replace", testTargetKeepSecrets},
		{"Targets/max-attempts-stored-and-replaced", testTargetMaxAttempts},
		{"Targets/negative-max-attempts-refused", testTargetMaxAttemptsInvalid},
	}
}

// testTargetLifecycle: TargetPut creates then replaces (keeping CreatedAt),
// TargetList filters by tenant in (tenant, name) order, TargetDelete removes
// one and says ErrNotFound after.
func testTargetLifecycle(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := &store.DeliveryTarget{Tenant: "t1", Name: "b-orders", Queue: "orders", URL: "http://127.0.0.1:1/a",
		Secrets: []string{"whsec_one", "whsec_two"}, Timeout: 1500 * time.Millisecond, UpdatedAt: at(0)}
	created, err := s.TargetPut(ctx, a)
	wantOK(t, "put", err)
	if !created {
		t.Fatalf("first put: created = false")
	}
	b := &store.DeliveryTarget{Tenant: "t1", Name: "a-mail", Kind: "mail.send", URL: "http://127.0.0.1:1/b", UpdatedAt: at(time.Second)}
	_, err = s.TargetPut(ctx, b)
	wantOK(t, "put b", err)
	_, err = s.TargetPut(ctx, &store.DeliveryTarget{Tenant: "t2", Name: "x", Queue: "q", URL: "http://h/x", UpdatedAt: at(0)})
	wantOK(t, "put t2", err)

	repl := *a
	repl.URL, repl.Secrets, repl.UpdatedAt = "http://127.0.0.1:1/new", []string{"whsec_three"}, at(time.Minute)
	created, err = s.TargetPut(ctx, &repl)
	wantOK(t, "replace", err)
	if created {
		t.Fatalf("replace: created = true")
	}
	got, err := s.TargetList(ctx, &store.TargetListParams{Tenant: "t1"})
	wantOK(t, "list", err)
	if len(got) != 2 || got[0].Name != "a-mail" || got[1].Name != "b-orders" {
		t.Fatalf("list t1 = %+v, want a-mail, b-orders", got)
	}
	o := got[1]
	if o.URL != repl.URL || len(o.Secrets) != 1 || o.Secrets[0] != "whsec_three" || o.Queue != "orders" ||
		o.Timeout != 1500*time.Millisecond || !o.CreatedAt.Equal(at(0)) || !o.UpdatedAt.Equal(at(time.Minute)) {
		t.Fatalf("replaced target = %+v", o)
	}
	if got[0].Secrets == nil || len(got[0].Secrets) != 0 {
		t.Fatalf("no secrets: got %#v, want empty", got[0].Secrets)
	}
	all, err := s.TargetList(ctx, &store.TargetListParams{})
	wantOK(t, "list all", err)
	if len(all) != 3 {
		t.Fatalf("list all: %d targets, want 3", len(all))
	}
	wantOK(t, "delete", s.TargetDelete(ctx, &store.TargetDeleteParams{Tenant: "t1", Name: "a-mail"}))
	wantErr(t, "delete again", s.TargetDelete(ctx, &store.TargetDeleteParams{Tenant: "t1", Name: "a-mail"}), idemtype.ErrNotFound)
	wantErr(t, "delete other tenant", s.TargetDelete(ctx, &store.TargetDeleteParams{Tenant: "t1", Name: "x"}), idemtype.ErrNotFound)
}

// testTargetInvalid: a target without a name, URL or scope is refused with
// ErrInvalid and nothing is stored.
func testTargetInvalid(t *testing.T, s store.Store) {
	ctx := context.Background()
	for _, bad := range []*store.DeliveryTarget{
		{Tenant: "t", URL: "http://h", Queue: "q"},
		{Tenant: "t", Name: "n", Queue: "q"},
		{Tenant: "t", Name: "n", URL: "http://h"},
		{Tenant: "t", Name: "n", URL: "http://h", Queue: "q", Timeout: -time.Second},
	} {
		_, err := s.TargetPut(ctx, bad)
		wantErr(t, "put invalid", err, idemtype.ErrInvalid)
	}
	got, err := s.TargetList(ctx, &store.TargetListParams{})
	wantOK(t, "list", err)
	if len(got) != 0 {
		t.Fatalf("invalid puts stored %d targets", len(got))
	}
}

// testTargetReplaceSameInstant: a second put of a target reports created =
// false even when its UpdatedAt equals the first put's (an injected clock).
func testTargetReplaceSameInstant(t *testing.T, s store.Store) {
	ctx := context.Background()
	d := &store.DeliveryTarget{Tenant: "t", Name: "orders/billing", Kind: "topic:orders/billing",
		URL: "http://127.0.0.1:1/a", Topic: "orders", UpdatedAt: at(0)}
	for i, want := range []bool{true, false, false} {
		created, err := s.TargetPut(ctx, d)
		wantOK(t, "put", err)
		if created != want {
			t.Fatalf("put %d at the same instant: created = %v, want %v", i+1, created, want)
		}
	}
}

// testTargetKeepSecrets: with KeepSecrets, a put that creates the row
// stores its Secrets and a put that replaces it keeps the stored ones
// (everything else is replaced); without it, Secrets replace them.
func testTargetKeepSecrets(t *testing.T, s store.Store) {
	ctx := context.Background()
	list := func() *store.DeliveryTarget {
		t.Helper()
		got, err := s.TargetList(ctx, &store.TargetListParams{Tenant: "t"})
		wantOK(t, "list", err)
		if len(got) != 1 {
			t.Fatalf("list: %d targets, want 1", len(got))
		}
		return got[0]
	}
	for _, topic := range []string{"", "orders"} {
		d := &store.DeliveryTarget{Tenant: "t", Name: "n", Queue: "q", URL: "http://127.0.0.1:1/a", Topic: topic,
			Secrets: []string{"whsec_one"}, KeepSecrets: true, UpdatedAt: at(0)}
		created, err := s.TargetPut(ctx, d)
		wantOK(t, "put", err)
		if got := list(); !created || len(got.Secrets) != 1 || got.Secrets[0] != "whsec_one" {
			t.Fatalf("topic %q: created %v, secrets %v; want true, [whsec_one]", topic, created, got.Secrets)
		}
		again := *d
		again.URL, again.Secrets, again.UpdatedAt = "http://127.0.0.1:1/b", []string{"whsec_two"}, at(time.Second)
		created, err = s.TargetPut(ctx, &again)
		wantOK(t, "put again", err)
		if got := list(); created || len(got.Secrets) != 1 || got.Secrets[0] != "whsec_one" || got.URL != again.URL {
			t.Fatalf("topic %q: replace with KeepSecrets: created %v, %+v; want the new URL and [whsec_one]", topic, created, got)
		}
		again.KeepSecrets, again.Secrets = false, []string{"whsec_three", "whsec_one"}
		_, err = s.TargetPut(ctx, &again)
		wantOK(t, "rotate", err)
		if got := list(); len(got.Secrets) != 2 || got.Secrets[0] != "whsec_three" {
			t.Fatalf("topic %q: replace without KeepSecrets: secrets %v", topic, got.Secrets)
		}
		wantOK(t, "delete", s.TargetDelete(ctx, &store.TargetDeleteParams{Tenant: "t", Name: "n"}))
	}
}

// testTargetTopicClash: a plain target (topic "") and a subscription
// (topic set) of one name never replace each other: the put is refused with
// ErrInvalid and the stored row is kept.
func testTargetTopicClash(t *testing.T, s store.Store) {
	ctx := context.Background()
	sub := &store.DeliveryTarget{Tenant: "t", Name: "orders/billing", Kind: "topic:orders/billing",
		URL: "http://127.0.0.1:1/sub", Topic: "orders", UpdatedAt: at(0)}
	plain := &store.DeliveryTarget{Tenant: "t", Name: "orders/billing", Queue: "q",
		URL: "http://127.0.0.1:1/plain", UpdatedAt: at(time.Second)}
	other := *sub
	other.Topic, other.URL = "orders2", "http://127.0.0.1:1/other"
	_, err := s.TargetPut(ctx, sub)
	wantOK(t, "put subscription", err)
	_, err = s.TargetPut(ctx, plain)
	wantErr(t, "plain target over a subscription", err, idemtype.ErrInvalid)
	_, err = s.TargetPut(ctx, &other)
	wantErr(t, "subscription of another topic", err, idemtype.ErrInvalid)
	got, err := s.TargetList(ctx, &store.TargetListParams{Tenant: "t"})
	wantOK(t, "list", err)
	if len(got) != 1 || got[0].Topic != "orders" || got[0].URL != sub.URL {
		t.Fatalf("after the refused puts: %+v, want the subscription unchanged", got)
	}

	plain.Name, plain.Tenant = "a/b", "u"
	_, err = s.TargetPut(ctx, plain)
	wantOK(t, "put plain target", err)
	sub.Name, sub.Tenant, sub.Topic = "a/b", "u", "a"
	_, err = s.TargetPut(ctx, sub)
	wantErr(t, "subscription over a plain target", err, idemtype.ErrInvalid)
	got, err = s.TargetList(ctx, &store.TargetListParams{Tenant: "u"})
	wantOK(t, "list", err)
	if len(got) != 1 || got[0].Topic != "" || got[0].URL != plain.URL {
		t.Fatalf("after the refused put: %+v, want the plain target unchanged", got)
	}
}

// testAttemptDeliveryList: the attempts that name a target are listed
// newest first, from Since, per tenant, up to Limit, with their status;
// attempts without a target are not.
func testAttemptDeliveryList(t *testing.T, s store.Store) {
	ctx := context.Background()
	other := newJob("hook")
	other.Tenant = "t2"
	jobs := insertNew(t, s, at(0), newJob("hook"), newJob("hook"), newJob("plain"), other)
	for i, j := range jobs {
		r := claimJob(t, s, j, at(time.Duration(i)*time.Minute))
		fin := failure(r, idemtype.StateRetryable, idemtype.OutcomeFailed, "HTTP 503", at(time.Hour), at(time.Duration(i)*time.Minute+time.Second))
		if j.Kind == "hook" {
			fin.Target, fin.HTTPStatus = "orders", 503
		}
		finish1(t, s, fin)
	}
	r := claimJob(t, s, mustGet(t, s, jobs[0].ID), at(time.Hour))
	fin := completion(r, `{"ok":true}`, at(time.Hour+time.Second))
	fin.Target, fin.HTTPStatus = "orders", 200
	finish1(t, s, fin)

	got, err := s.AttemptDeliveryList(ctx, &store.AttemptDeliveryListParams{Tenant: "default", Since: at(0)})
	wantOK(t, "list", err)
	if len(got) != 3 || got[0].HTTPStatus != 200 || got[0].JobID != jobs[0].ID || got[1].JobID != jobs[1].ID ||
		got[2].JobID != jobs[0].ID || got[2].HTTPStatus != 503 || got[1].Target != "orders" || got[1].DurationMS != 3 {
		t.Fatalf("delivery attempts = %+v", got)
	}
	got, err = s.AttemptDeliveryList(ctx, &store.AttemptDeliveryListParams{Since: at(90 * time.Second), Limit: 10})
	wantOK(t, "list since", err)
	if len(got) != 2 || got[1].JobID != jobs[3].ID {
		t.Fatalf("since 90s, all tenants = %+v, want the t2 job's and the completion", got)
	}
	got, err = s.AttemptDeliveryList(ctx, &store.AttemptDeliveryListParams{Since: at(0), Limit: 1})
	wantOK(t, "limit", err)
	if len(got) != 1 || got[0].HTTPStatus != 200 {
		t.Fatalf("limit 1 = %+v", got)
	}
}

// testAttemptDeliveryTenant: every delivery attempt carries the tenant of
// its job, so the attempts of two tenants' targets of the same name stay
// apart when every tenant is listed; a tenant's list has its own only.
func testAttemptDeliveryTenant(t *testing.T, s store.Store) {
	ctx := context.Background()
	a, b := newJob("hook"), newJob("hook")
	a.Tenant, b.Tenant = "ta", "tb"
	jobs := insertNew(t, s, at(0), a, b, newJob("hook"))
	for i, j := range jobs {
		r := claimJob(t, s, j, at(time.Duration(i)*time.Minute))
		fin := completion(r, `{}`, at(time.Duration(i)*time.Minute+time.Second))
		fin.Target, fin.HTTPStatus = "orders", 200
		finish1(t, s, fin)
	}
	tenants := func(l []*store.DeliveryAttempt) (out []string) {
		for _, d := range l {
			out = append(out, fmt.Sprintf("%s:%d:%s", d.Tenant, d.JobID, d.Target))
		}
		return out
	}
	want := func(js ...*idemtype.JobRow) (out []string) {
		for _, j := range js {
			out = append(out, fmt.Sprintf("%s:%d:orders", j.Tenant, j.ID))
		}
		return out
	}
	got, err := s.AttemptDeliveryList(ctx, &store.AttemptDeliveryListParams{Since: at(0)})
	wantOK(t, "list every tenant", err)
	if g, w := tenants(got), want(jobs[2], jobs[1], jobs[0]); !slices.Equal(g, w) {
		t.Fatalf("every tenant: tenant:job:target = %v, want %v", g, w)
	}
	got, err = s.AttemptDeliveryList(ctx, &store.AttemptDeliveryListParams{Tenant: "tb", Since: at(0)})
	wantOK(t, "list tenant tb", err)
	if g, w := tenants(got), want(jobs[1]); !slices.Equal(g, w) {
		t.Fatalf("tenant tb: tenant:job:target = %v, want %v", g, w)
	}
}

// testTargetMaxAttempts: MaxAttempts (the attempts of each delivery job of
// a subscription; 0 = the client's default) is stored, listed, and
// replaced by a put, with or without KeepSecrets.
func testTargetMaxAttempts(t *testing.T, s store.Store) {
	ctx := context.Background()
	d := &store.DeliveryTarget{Tenant: "t", Name: "orders/billing", Kind: "topic:orders/billing",
		URL: "http://127.0.0.1:1/a", Topic: "orders", EventTypes: []string{"paid"}, MaxAttempts: 2, UpdatedAt: at(0)}
	plain := &store.DeliveryTarget{Tenant: "t", Name: "plain", Queue: "q", URL: "http://127.0.0.1:1/p", UpdatedAt: at(0)}
	for _, p := range []*store.DeliveryTarget{d, plain} {
		_, err := s.TargetPut(ctx, p)
		wantOK(t, "put", err)
	}
	list := func() []*store.DeliveryTarget {
		t.Helper()
		got, err := s.TargetList(ctx, &store.TargetListParams{Tenant: "t"})
		wantOK(t, "list", err)
		if len(got) != 2 {
			t.Fatalf("list: %d targets, want 2", len(got))
		}
		return got
	}
	if got := list(); got[0].MaxAttempts != 2 || got[1].MaxAttempts != 0 {
		t.Fatalf("max attempts %d and %d, want 2 (set) and 0 (not set)", got[0].MaxAttempts, got[1].MaxAttempts)
	}
	again := *d
	again.MaxAttempts, again.KeepSecrets, again.UpdatedAt = 7, true, at(time.Second)
	_, err := s.TargetPut(ctx, &again)
	wantOK(t, "replace", err)
	if got := list(); got[0].MaxAttempts != 7 {
		t.Fatalf("replaced: max attempts %d, want 7", got[0].MaxAttempts)
	}
	again.MaxAttempts, again.KeepSecrets, again.UpdatedAt = 0, false, at(2*time.Second)
	_, err = s.TargetPut(ctx, &again)
	wantOK(t, "replace with the default", err)
	if got := list(); got[0].MaxAttempts != 0 {
		t.Fatalf("replaced with 0: max attempts %d, want 0", got[0].MaxAttempts)
	}
}

// testTargetMaxAttemptsInvalid: a negative MaxAttempts is refused with
// ErrInvalid and nothing is stored.
func testTargetMaxAttemptsInvalid(t *testing.T, s store.Store) {
	ctx := context.Background()
	_, err := s.TargetPut(ctx, &store.DeliveryTarget{Tenant: "t", Name: "orders/billing", Kind: "topic:orders/billing",
		URL: "http://127.0.0.1:1/a", Topic: "orders", MaxAttempts: -1, UpdatedAt: at(0)})
	wantErr(t, "negative max attempts", err, idemtype.ErrInvalid)
	got, err := s.TargetList(ctx, &store.TargetListParams{Tenant: "t"})
	wantOK(t, "list", err)
	if len(got) != 0 {
		t.Fatalf("stored %+v after a refused put", got)
	}
}
