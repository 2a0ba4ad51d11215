package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

func targetCases() []testCase {
	return []testCase{
		{"Targets/put-list-replace-delete", testTargetLifecycle},
		{"Targets/invalid", testTargetInvalid},
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
