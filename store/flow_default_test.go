package store_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// A default limit gives each tenant its own budget: windows and running
// counts per tenant; a tenant's own limit for the same queue scope replaces
// it; spent tenants are excluded; usage goes back per tenant, marked
// inherited, and the default row counts the throttling.
func TestClaimBudgetDefaults(t *testing.T) {
	t.Parallel()
	now := t0.Add(30 * time.Second)
	def := &store.Limit{FlowScope: store.FlowScope{Tenant: store.EveryTenant, Queue: "mail"}, Rate: 5, Period: time.Minute, Concurrency: 3}
	own := &store.Limit{FlowScope: store.FlowScope{Tenant: "big", Queue: "mail"}, Rate: 100, Period: time.Minute}
	b := store.NewClaimBudget(now, []*store.Limit{def, own}, nil)
	if !b.HasDefaults() {
		t.Fatal("HasDefaults is false with a default limit")
	}
	b.SetInherited([]store.InheritedWindow{
		{Tenant: "spent", Queue: "mail", WindowStart: t0, WindowUsed: 5},
		{Tenant: "half", Queue: "mail", WindowStart: t0, WindowUsed: 3},
		{Tenant: "old", Queue: "mail", WindowStart: t0.Add(-time.Minute), WindowUsed: 5},
	}, []store.RunningCount{{Tenant: "busy", Queue: "mail", N: 3}, {Tenant: "half", Queue: "other", N: 9}})
	if got := b.Excluded("mail", ""); !slices.Equal(got, []string{"busy", "spent"}) {
		t.Errorf("Excluded = %v, want busy (3 running) and spent (5 used)", got)
	}
	// Both held work back (the store found jobs of theirs waiting).
	b.HeldBack("", b.SpentScopes(""))
	for _, c := range []struct {
		tenant string
		want   int
	}{{"half", 2}, {"old", 3}, {"new", 3}, {"big", 50}, {"spent", 0}} {
		if got := b.Quota(c.tenant, "mail", 50); got != c.want {
			t.Errorf("Quota(%s) = %d, want %d", c.tenant, got, c.want)
		}
		b.Claimed(c.tenant, "mail", c.want)
	}
	if got := b.Quota("new", "other", 50); got != 50 {
		t.Errorf("Quota in a queue without a default = %d, want 50", got)
	}
	us := b.Usage()
	var inherited []string
	defaultThrottled := false
	for _, u := range us {
		switch {
		case u.Inherited:
			inherited = append(inherited, u.Scope.Tenant)
			if u.Scope.Tenant == "new" && (u.WindowUsed != 3 || !u.WindowStart.Equal(t0)) {
				t.Errorf("usage of new = %+v, want 3 in the window at t0", u)
			}
		case u.Scope.IsDefault():
			defaultThrottled = u.Throttled == 1
		}
	}
	slices.Sort(inherited)
	if !slices.Equal(inherited, []string{"busy", "half", "new", "old", "spent"}) {
		t.Errorf("inherited usage of %v", inherited)
	}
	if !defaultThrottled {
		t.Errorf("the default row does not count the throttling: %+v", us)
	}
}

func TestCheckInsertTenants(t *testing.T) {
	t.Parallel()
	ok := []*store.JobInsertParams{{Tenant: "a"}, nil}
	if err := store.CheckInsertTenants(ok); err != nil {
		t.Fatalf("CheckInsertTenants(a) = %v", err)
	}
	err := store.CheckInsertTenants(append(ok, &store.JobInsertParams{Tenant: "*"}))
	var ie *idemtype.InvalidError
	if !errors.As(err, &ie) || ie.Field != "tenant" {
		t.Fatalf("CheckInsertTenants(*) = %v, want invalid tenant", err)
	}
}
