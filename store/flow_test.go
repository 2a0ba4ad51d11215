package store_test

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// t0 is a moment on a whole minute, so windows of a minute start on it.
var t0 = time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)

func invalidField(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		return ""
	}
	var ie *idemtype.InvalidError
	if !errors.As(err, &ie) || !errors.Is(err, idemtype.ErrInvalid) {
		t.Fatalf("not an *idemtype.InvalidError wrapping ErrInvalid: %T %v", err, err)
	}
	return ie.Field
}

func TestFlowScopeValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		scope store.FlowScope
		field string
	}{
		{store.FlowScope{}, "scope"},
		{store.FlowScope{Tenant: "acme"}, ""},
		{store.FlowScope{Queue: "mail"}, ""},
		{store.FlowScope{Tenant: "acme", Queue: "mail"}, ""},
	} {
		if got := invalidField(t, tc.scope.Validate()); got != tc.field {
			t.Errorf("%+v: invalid field %q, want %q", tc.scope, got, tc.field)
		}
	}
}

func TestLimitValidate(t *testing.T) {
	t.Parallel()
	q := store.FlowScope{Queue: "mail"}
	tn := store.FlowScope{Tenant: "acme"}
	for _, tc := range []struct {
		name  string
		limit store.Limit
		field string
	}{
		{"no scope", store.Limit{Concurrency: 1}, "scope"},
		{"rate", store.Limit{FlowScope: q, Rate: 10, Period: time.Minute}, ""},
		{"concurrency", store.Limit{FlowScope: q, Concurrency: 3}, ""},
		{"both", store.Limit{FlowScope: q, Rate: 10, Period: time.Second, Concurrency: 3}, ""},
		{"weight of a tenant", store.Limit{FlowScope: tn, Weight: 5}, ""},
		{"largest weight", store.Limit{FlowScope: tn, Weight: store.MaxWeight}, ""},
		{"smallest period", store.Limit{FlowScope: q, Rate: 1, Period: time.Millisecond}, ""},
		{"negative rate", store.Limit{FlowScope: q, Rate: -1, Period: time.Second}, "rate"},
		{"rate without period", store.Limit{FlowScope: q, Rate: 5}, "rate"},
		{"period under 1ms", store.Limit{FlowScope: q, Rate: 5, Period: time.Microsecond}, "rate"},
		{"negative concurrency", store.Limit{FlowScope: q, Concurrency: -1}, "concurrency"},
		{"negative weight", store.Limit{FlowScope: tn, Weight: -1}, "weight"},
		{"weight too large", store.Limit{FlowScope: tn, Weight: store.MaxWeight + 1}, "weight"},
		{"weight of a queue", store.Limit{FlowScope: q, Weight: 2}, "weight"},
		{"nothing set", store.Limit{FlowScope: q}, "rate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := invalidField(t, tc.limit.Validate()); got != tc.field {
				t.Errorf("invalid field %q, want %q", got, tc.field)
			}
		})
	}
}

func TestLimitLimited(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		l    store.Limit
		want bool
	}{
		{store.Limit{Rate: 1, Period: time.Second}, true},
		{store.Limit{Concurrency: 1}, true},
		{store.Limit{Weight: 3}, false},
		{store.Limit{}, false},
	} {
		if got := tc.l.Limited(); got != tc.want {
			t.Errorf("%+v: Limited %v, want %v", tc.l, got, tc.want)
		}
	}
}

func TestQueuePauseParamsValidate(t *testing.T) {
	t.Parallel()
	if f := invalidField(t, (&store.QueuePauseParams{Scope: store.FlowScope{Tenant: "acme"}}).Validate()); f != "queue" {
		t.Errorf("tenant only: field %q, want queue", f)
	}
	if err := (&store.QueuePauseParams{Scope: store.FlowScope{Queue: "mail"}}).Validate(); err != nil {
		t.Errorf("queue: %v", err)
	}
	if err := (&store.QueuePauseParams{Scope: store.FlowScope{Queue: "mail", Tenant: "acme"}}).Validate(); err != nil {
		t.Errorf("tenant in queue: %v", err)
	}
}

// rateLimit is a limit of rate per minute on scope, with usage loaded.
func rateLimit(sc store.FlowScope, rate int, windowStart time.Time, used int) *store.Limit {
	return &store.Limit{FlowScope: sc, Rate: rate, Period: time.Minute, WindowStart: windowStart, WindowUsed: used}
}

func TestClaimBudgetRateWindow(t *testing.T) {
	t.Parallel()
	q := store.FlowScope{Queue: "mail"}
	now := t0.Add(30 * time.Second)
	for _, tc := range []struct {
		name        string
		windowStart time.Time
		used        int
		want        int
	}{
		{"current window counts what it used", t0, 7, 3},
		{"current window spent", t0, 10, 0},
		{"current window overspent", t0, 12, 0},
		{"a past window refills", t0.Add(-time.Minute), 10, 10},
		{"never used", time.Time{}, 0, 10},
		{"a window ahead of this claim's clock gives nothing", t0.Add(time.Minute), 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := store.NewClaimBudget(now, []*store.Limit{rateLimit(q, 10, tc.windowStart, tc.used)}, nil)
			if got := b.Quota("acme", "mail", 100); got != tc.want {
				t.Errorf("quota %d, want %d", got, tc.want)
			}
		})
	}
}

func TestClaimBudgetConcurrency(t *testing.T) {
	t.Parallel()
	q := store.FlowScope{Queue: "mail"}
	for _, tc := range []struct {
		name    string
		limit   store.Limit
		running int
		want    int
	}{
		{"free slots", store.Limit{FlowScope: q, Concurrency: 5}, 2, 3},
		{"full", store.Limit{FlowScope: q, Concurrency: 5}, 5, 0},
		{"over (limit lowered while running)", store.Limit{FlowScope: q, Concurrency: 5}, 9, 0},
		{"rate is the smaller", store.Limit{FlowScope: q, Concurrency: 5, Rate: 2, Period: time.Minute}, 0, 2},
		{"concurrency is the smaller", store.Limit{FlowScope: q, Concurrency: 5, Rate: 20, Period: time.Minute}, 4, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := tc.limit
			l.Running = tc.running
			b := store.NewClaimBudget(t0, []*store.Limit{&l}, nil)
			if got := b.Quota("acme", "mail", 100); got != tc.want {
				t.Errorf("quota %d, want %d", got, tc.want)
			}
		})
	}
}

func TestClaimBudgetQuotaReservesFromEveryLimitThatApplies(t *testing.T) {
	t.Parallel()
	queue := &store.Limit{FlowScope: store.FlowScope{Queue: "mail"}, Concurrency: 10}
	acme := &store.Limit{FlowScope: store.FlowScope{Tenant: "acme"}, Concurrency: 4}
	other := &store.Limit{FlowScope: store.FlowScope{Queue: "sms"}, Concurrency: 1}
	b := store.NewClaimBudget(t0, []*store.Limit{queue, acme, other}, nil)

	if got := b.Quota("acme", "mail", 6); got != 4 {
		t.Fatalf("acme quota %d, want 4 (its tenant limit)", got)
	}
	if got := b.Quota("acme", "mail", 1); got != 0 {
		t.Fatalf("acme after its limit is reserved: %d, want 0", got)
	}
	// The queue limit gave 4 to acme: 6 are left for the others.
	if got := b.Quota("globex", "mail", 100); got != 6 {
		t.Fatalf("globex quota %d, want 6", got)
	}
	// A limit of another queue is untouched by claims in mail.
	if got := b.Quota("globex", "sms", 100); got != 1 {
		t.Fatalf("sms quota %d, want 1", got)
	}
	// Unclaimed reservations come back.
	b.Return("acme", "mail", 3)
	if got := b.Quota("acme", "mail", 100); got != 3 {
		t.Fatalf("acme after returning 3: %d, want 3", got)
	}
}

func TestClaimBudgetUnlimited(t *testing.T) {
	t.Parallel()
	b := store.NewClaimBudget(t0, nil, nil)
	if b.HasLimits() {
		t.Error("HasLimits without limits")
	}
	if !b.QueueOpen("mail") || len(b.Excluded("mail", "")) != 0 {
		t.Error("a queue without limits or pauses is closed")
	}
	if got := b.Quota("acme", "mail", 25); got != 25 {
		t.Errorf("quota %d, want all 25", got)
	}
	if us := b.Usage(); len(us) != 0 {
		t.Errorf("usage without limits: %+v", us)
	}
	var r store.ClaimReport
	b.Report(&r)
	if r.Throttled || !r.NextRefill.IsZero() {
		t.Errorf("report %+v", r)
	}
	// A weight alone limits nothing.
	w := &store.Limit{FlowScope: store.FlowScope{Tenant: "acme"}, Weight: 3}
	b = store.NewClaimBudget(t0, []*store.Limit{w}, nil)
	if got := b.Quota("acme", "mail", 25); got != 25 {
		t.Errorf("quota with a weight only %d, want 25", got)
	}
}

func TestClaimBudgetQueueOpen(t *testing.T) {
	t.Parallel()
	spent := &store.Limit{FlowScope: store.FlowScope{Queue: "full"}, Concurrency: 1, Running: 1}
	tenantSpent := &store.Limit{FlowScope: store.FlowScope{Tenant: "acme", Queue: "mail"}, Concurrency: 1, Running: 1}
	paused := []store.FlowScope{{Queue: "stopped"}, {Queue: "mail", Tenant: "globex"}}
	b := store.NewClaimBudget(t0, []*store.Limit{spent, tenantSpent}, paused)
	for queue, want := range map[string]bool{
		"stopped": false, // paused as a whole
		"full":    false, // its queue limit is spent
		"mail":    true,  // only tenants' work in it is paused or spent
		"other":   true,
	} {
		if got := b.QueueOpen(queue); got != want {
			t.Errorf("QueueOpen(%q) = %v, want %v", queue, got, want)
		}
	}
	// Closing a queue for a spent limit counts as throttling by it only
	// when the limit held work back: the store looks up the scopes it
	// kept the claim from (a claim of one tenant: that tenant's work).
	var r store.ClaimReport
	b.Report(&r)
	if r.Throttled {
		t.Error("a queue closed by its limit is reported as throttled before any work was found held back")
	}
	if got, want := b.SpentScopes(""), []store.FlowScope{{Queue: "full"}}; !slices.Equal(got, want) {
		t.Errorf("SpentScopes = %v, want %v", got, want)
	}
	if got, want := b.SpentScopes("acme"), []store.FlowScope{{Tenant: "acme", Queue: "full"}}; !slices.Equal(got, want) {
		t.Errorf("SpentScopes(acme) = %v, want %v", got, want)
	}
	b.HeldBack("", []store.FlowScope{{Queue: "other"}})
	if b.Report(&r); r.Throttled {
		t.Error("work of another queue counts the claim as throttled")
	}
	b.HeldBack("acme", []store.FlowScope{{Tenant: "acme", Queue: "full"}})
	if b.Report(&r); !r.Throttled {
		t.Error("a queue closed by its limit with work held back is not reported as throttled")
	}
}

func TestClaimBudgetExcluded(t *testing.T) {
	t.Parallel()
	limits := []*store.Limit{
		{FlowScope: store.FlowScope{Tenant: "zeta"}, Concurrency: 2, Running: 2},                   // every queue
		{FlowScope: store.FlowScope{Tenant: "acme", Queue: "mail"}, Concurrency: 1, Running: 1},    // this queue
		{FlowScope: store.FlowScope{Tenant: "globex", Queue: "sms"}, Concurrency: 1, Running: 1},   // another queue
		{FlowScope: store.FlowScope{Tenant: "initech", Queue: "mail"}, Concurrency: 3, Running: 1}, // not spent
		{FlowScope: store.FlowScope{Queue: "mail"}, Concurrency: 100},                              // a queue limit, not a tenant
	}
	paused := []store.FlowScope{{Queue: "mail", Tenant: "hooli"}, {Queue: "sms", Tenant: "umbrella"}, {Queue: "mail"}}
	b := store.NewClaimBudget(t0, limits, paused)
	got := b.Excluded("mail", "")
	want := []string{"acme", "hooli", "zeta"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Excluded(mail) = %v, want %v", got, want)
	}
	got = b.Excluded("sms", "")
	want = []string{"globex", "umbrella", "zeta"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Excluded(sms) = %v, want %v", got, want)
	}
}

func TestClaimBudgetUsage(t *testing.T) {
	t.Parallel()
	now := t0.Add(10 * time.Second)
	mail := store.FlowScope{Queue: "mail"}
	acme := store.FlowScope{Tenant: "acme"}
	sms := store.FlowScope{Queue: "sms"}
	conc := store.FlowScope{Queue: "conc"}
	limits := []*store.Limit{
		rateLimit(mail, 10, t0, 4),                  // same window: adds to it
		rateLimit(acme, 5, t0.Add(-time.Minute), 5), // a past window: starts the current one
		rateLimit(sms, 10, t0, 2),                   // nothing claimed in sms: not written
		{FlowScope: conc, Concurrency: 5},           // concurrency only, not hit: not written
	}
	b := store.NewClaimBudget(now, limits, nil)
	n := b.Quota("acme", "mail", 3)
	if n != 3 {
		t.Fatalf("quota %d", n)
	}
	b.Claimed("acme", "mail", 3)
	b.Quota("beta", "conc", 1)
	b.Claimed("beta", "conc", 1)

	got := map[store.FlowScope]store.LimitUsage{}
	for _, u := range b.Usage() {
		got[u.Scope] = u
	}
	want := map[store.FlowScope]store.LimitUsage{
		mail: {Scope: mail, WindowStart: t0, WindowUsed: 7},
		acme: {Scope: acme, WindowStart: t0, WindowUsed: 3},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("usage\n got %+v\nwant %+v", got, want)
	}
}

func TestClaimBudgetUsageCountsThrottling(t *testing.T) {
	t.Parallel()
	conc := &store.Limit{FlowScope: store.FlowScope{Queue: "mail"}, Concurrency: 2}
	b := store.NewClaimBudget(t0, []*store.Limit{conc}, nil)
	if got := b.Quota("acme", "mail", 5); got != 2 {
		t.Fatalf("quota %d", got)
	}
	b.Claimed("acme", "mail", 2)
	us := b.Usage()
	if len(us) != 1 || us[0].Throttled != 1 || us[0].Scope != conc.FlowScope {
		t.Fatalf("usage %+v, want one throttled row for mail", us)
	}
	// A concurrency limit keeps no window.
	if !us[0].WindowStart.IsZero() || us[0].WindowUsed != 0 {
		t.Errorf("window of a concurrency limit: %+v", us[0])
	}
	// Asking for exactly what is left is not throttling.
	b = store.NewClaimBudget(t0, []*store.Limit{{FlowScope: conc.FlowScope, Concurrency: 2}}, nil)
	b.Quota("acme", "mail", 2)
	if us := b.Usage(); len(us) != 0 {
		t.Errorf("usage when nothing was left behind: %+v", us)
	}
}

// TestClaimBudgetQuotaMarksLimitsInOrder: a quota marks as throttling the
// limits that lowered it, taken in the order the limits were given, whether
// they name the tenant or every tenant; other tenants' limits play no part.
func TestClaimBudgetQuotaMarksLimitsInOrder(t *testing.T) {
	t.Parallel()
	own := func() *store.Limit {
		return &store.Limit{FlowScope: store.FlowScope{Tenant: "acme"}, Rate: 5, Period: time.Minute}
	}
	queue := func() *store.Limit {
		return &store.Limit{FlowScope: store.FlowScope{Queue: "mail"}, Rate: 3, Period: time.Minute}
	}
	other := func() *store.Limit {
		return &store.Limit{FlowScope: store.FlowScope{Tenant: "globex"}, Rate: 1, Period: time.Minute}
	}
	for _, tc := range []struct {
		name   string
		limits []*store.Limit
		hit    []store.FlowScope
	}{
		{"tenant's first", []*store.Limit{other(), own(), queue()}, []store.FlowScope{{Tenant: "acme"}, {Queue: "mail"}}},
		{"queue's first", []*store.Limit{queue(), other(), own()}, []store.FlowScope{{Queue: "mail"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := store.NewClaimBudget(t0, tc.limits, nil)
			if got := b.Quota("acme", "mail", 10); got != 3 {
				t.Fatalf("quota %d, want 3", got)
			}
			b.Claimed("acme", "mail", 3)
			var hit []store.FlowScope
			for _, u := range b.Usage() {
				if u.Throttled > 0 {
					hit = append(hit, u.Scope)
				}
				if u.Scope.Tenant == "globex" {
					t.Errorf("usage of another tenant's limit: %+v", u)
				}
			}
			if !reflect.DeepEqual(hit, tc.hit) {
				t.Errorf("throttled %v, want %v", hit, tc.hit)
			}
		})
	}
}

func TestClaimBudgetReport(t *testing.T) {
	t.Parallel()
	now := t0.Add(10 * time.Second)
	minute := rateLimit(store.FlowScope{Queue: "mail"}, 2, t0, 0)
	hour := &store.Limit{FlowScope: store.FlowScope{Tenant: "globex"}, Rate: 1, Period: time.Hour}
	conc := &store.Limit{FlowScope: store.FlowScope{Queue: "sms"}, Concurrency: 1}

	b := store.NewClaimBudget(now, []*store.Limit{hour, minute, conc}, nil)
	b.Report(nil)                                                               // no report asked for: nothing to do
	b.Quota("globex", "mail", 5)                                                // the hour limit binds: 1
	b.Quota("acme", "mail", 5)                                                  // the minute limit binds: the 1 left
	r := store.ClaimReport{Throttled: true, NextRefill: t0.Add(time.Hour * 24)} // stale content is replaced
	b.Report(&r)
	if !r.Throttled {
		t.Fatal("not throttled")
	}
	// Both rate limits throttled and are spent; the minute window ends first.
	if want := t0.Add(time.Minute); !r.NextRefill.Equal(want) {
		t.Errorf("NextRefill %v, want %v", r.NextRefill, want)
	}

	// When two limits are spent by one quota, the one that bound it
	// decides: claiming again after the minute would still meet the hour.
	hourAcme := &store.Limit{FlowScope: store.FlowScope{Tenant: "acme"}, Rate: 2, Period: time.Hour}
	b = store.NewClaimBudget(now, []*store.Limit{hourAcme, rateLimit(store.FlowScope{Queue: "mail"}, 2, t0, 0)}, nil)
	b.Quota("acme", "mail", 5)
	b.Report(&r)
	if want := t0.Add(time.Hour); !r.Throttled || !r.NextRefill.Equal(want) {
		t.Errorf("report %+v, want a refill at %v", r, want)
	}

	// Throttled by concurrency only: no refill time to wait for.
	b = store.NewClaimBudget(now, []*store.Limit{conc}, nil)
	b.Quota("acme", "sms", 5)
	b.Report(&r)
	if !r.Throttled || !r.NextRefill.IsZero() {
		t.Errorf("concurrency throttle report %+v", r)
	}

	// A limit at its concurrency whose rate has room: no refill either
	// (its window's end is not when a slot frees). Spending the rate too
	// reports the window's end.
	both := &store.Limit{FlowScope: store.FlowScope{Queue: "sms"}, Rate: 3, Period: time.Hour, Concurrency: 1}
	b = store.NewClaimBudget(now, []*store.Limit{both}, nil)
	b.Quota("acme", "sms", 5)
	b.Report(&r)
	if !r.Throttled || !r.NextRefill.IsZero() {
		t.Errorf("concurrency throttle beside a rate with room: report %+v", r)
	}
	both = &store.Limit{FlowScope: both.FlowScope, Rate: 3, Period: time.Hour, Concurrency: 5}
	b = store.NewClaimBudget(now, []*store.Limit{both}, nil)
	b.Quota("acme", "sms", 5)
	b.Report(&r)
	if want := t0.Add(time.Hour); !r.Throttled || !r.NextRefill.Equal(want) {
		t.Errorf("rate spent beside a concurrency with room: report %+v, want a refill at %v", r, want)
	}

	// Nothing throttled: the report is cleared.
	b = store.NewClaimBudget(now, []*store.Limit{conc}, nil)
	b.Quota("acme", "sms", 1)
	b.Report(&r)
	if r != (store.ClaimReport{}) {
		t.Errorf("report without throttling %+v", r)
	}
}

// TestRateWindowsAlignToTheEpoch checks the fixed-window arithmetic through
// the report: a spent limit refills at the next multiple of its period
// since the Unix epoch, for times before 1970 too.
func TestRateWindowsAlignToTheEpoch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		now    time.Time
		period time.Duration
		want   time.Time
	}{
		{t0.Add(10 * time.Second), time.Minute, t0.Add(time.Minute)},
		{t0, time.Minute, t0.Add(time.Minute)}, // on a boundary: that window
		{t0.Add(-time.Microsecond), time.Minute, t0},
		{t0.Add(90 * time.Minute), 7 * time.Second, time.Unix(0, 0).Add(7 * time.Second * time.Duration((t0.Add(90*time.Minute).Unix()/7)+1))},
		{time.Unix(-30, 0), time.Minute, time.Unix(0, 0)},
		{time.Unix(-60, 0), time.Minute, time.Unix(0, 0)},
		{time.Unix(-61, 0), time.Minute, time.Unix(-60, 0)},
		{time.Unix(0, 1500*int64(time.Microsecond)), time.Millisecond, time.Unix(0, 2*int64(time.Millisecond))},
	} {
		l := &store.Limit{FlowScope: store.FlowScope{Queue: "q"}, Rate: 1, Period: tc.period}
		b := store.NewClaimBudget(tc.now, []*store.Limit{l}, nil)
		if got := b.Quota("t", "q", 2); got != 1 {
			t.Fatalf("%v: quota %d", tc.now, got)
		}
		var r store.ClaimReport
		b.Report(&r)
		if !r.NextRefill.Equal(tc.want) {
			t.Errorf("now %v period %v: refill %v, want %v", tc.now, tc.period, r.NextRefill, tc.want)
		}
		b.Claimed("t", "q", 1)
		us := b.Usage()
		if len(us) != 1 || !us[0].WindowStart.Equal(tc.want.Add(-tc.period)) || us[0].WindowStart.Location() != time.UTC {
			t.Errorf("now %v: usage %+v, want window %v in UTC", tc.now, us, tc.want.Add(-tc.period))
		}
	}
}

func TestClaimBudgetShares(t *testing.T) {
	t.Parallel()
	weights := []*store.Limit{
		{FlowScope: store.FlowScope{Tenant: "big"}, Weight: 3},
		{FlowScope: store.FlowScope{Tenant: "mixed"}, Weight: 4},
		{FlowScope: store.FlowScope{Tenant: "mixed", Queue: "mail"}, Weight: 1}, // more specific in mail
		{FlowScope: store.FlowScope{Tenant: "mixed", Queue: "sms"}, Weight: 8},  // another queue: ignored in mail
	}
	for _, tc := range []struct {
		name    string
		queue   string
		tenants []string
		limit   int
		want    []int
	}{
		{"equal weights split evenly", "mail", []string{"a", "b"}, 10, []int{5, 5}},
		{"rounded up", "mail", []string{"a", "b", "c"}, 10, []int{4, 4, 4}},
		{"a weight of 3 against 1", "mail", []string{"a", "big"}, 8, []int{2, 6}},
		{"the queue's own weight wins", "mail", []string{"a", "mixed"}, 4, []int{2, 2}},
		{"the tenant weight outside mail", "sms", []string{"a", "mixed"}, 9, []int{1, 8}},
		{"tenant weight where no queue weight", "other", []string{"a", "mixed"}, 5, []int{1, 4}},
		{"never zero for a claim of one", "mail", []string{"a", "big", "c"}, 1, []int{1, 1, 1}},
		{"no tenants", "mail", nil, 10, []int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := store.NewClaimBudget(t0, nil, nil)
			b.SetWeights(weights)
			got := b.Shares(tc.queue, tc.tenants, tc.limit)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("shares %v, want %v", got, tc.want)
			}
		})
	}
}

func TestHasConcurrencyAndSetRunning(t *testing.T) {
	t.Parallel()
	rate := &store.Limit{FlowScope: store.FlowScope{Queue: "mail"}, Rate: 1, Period: time.Second, Running: 99}
	if store.HasConcurrency([]*store.Limit{rate}) || store.HasConcurrency(nil) {
		t.Error("HasConcurrency without a concurrency limit")
	}
	mail := &store.Limit{FlowScope: store.FlowScope{Queue: "mail"}, Concurrency: 10}
	acme := &store.Limit{FlowScope: store.FlowScope{Tenant: "acme"}, Concurrency: 10}
	acmeMail := &store.Limit{FlowScope: store.FlowScope{Tenant: "acme", Queue: "mail"}, Concurrency: 10}
	limits := []*store.Limit{rate, mail, acme, acmeMail}
	if !store.HasConcurrency(limits) {
		t.Error("HasConcurrency missed one")
	}
	store.SetRunning(limits, []store.RunningCount{
		{Tenant: "acme", Queue: "mail", N: 2},
		{Tenant: "acme", Queue: "sms", N: 3},
		{Tenant: "globex", Queue: "mail", N: 5},
	})
	for _, tc := range []struct {
		l    *store.Limit
		want int
	}{{rate, 7}, {mail, 7}, {acme, 5}, {acmeMail, 2}} {
		if tc.l.Running != tc.want {
			t.Errorf("%+v: running %d, want %d", tc.l.FlowScope, tc.l.Running, tc.want)
		}
	}
	// Counts are replaced, not added to.
	store.SetRunning(limits, nil)
	for _, l := range limits {
		if l.Running != 0 {
			t.Errorf("%+v: running %d after no counts", l.FlowScope, l.Running)
		}
	}
}

// tenantIndex is a fake of the store's index probe over sorted tenants.
func tenantIndex(tenants []string) func(after, upTo string, k int) ([]string, error) {
	return func(after, upTo string, k int) ([]string, error) {
		var out []string
		for _, t := range tenants {
			if t > after && (upTo == "" || t <= upTo) && len(out) < k {
				out = append(out, t)
			}
		}
		return out, nil
	}
}

func TestClaimTenantsRotates(t *testing.T) {
	t.Parallel()
	next := tenantIndex([]string{"a", "b", "c", "d", "e"})
	cursor := ""
	var rounds [][]string
	for range 5 {
		ts, err := store.ClaimTenants(cursor, 2, next)
		if err != nil {
			t.Fatal(err)
		}
		rounds = append(rounds, ts)
		cursor = ts[len(ts)-1]
	}
	want := [][]string{{"a", "b"}, {"c", "d"}, {"e", "a"}, {"b", "c"}, {"d", "e"}}
	if !reflect.DeepEqual(rounds, want) {
		t.Errorf("rounds %v, want %v", rounds, want)
	}
}

func TestClaimTenantsVisitsEachTenantOnce(t *testing.T) {
	t.Parallel()
	next := tenantIndex([]string{"a", "b", "c", "d", "e"})
	for _, cursor := range []string{"", "a", "c", "e", "zz", "0"} {
		ts, err := store.ClaimTenants(cursor, 10, next)
		if err != nil {
			t.Fatal(err)
		}
		sorted := append([]string(nil), ts...)
		sort.Strings(sorted)
		if !reflect.DeepEqual(sorted, []string{"a", "b", "c", "d", "e"}) {
			t.Errorf("cursor %q: visited %v, want each tenant once", cursor, ts)
		}
		if cursor > "a" && cursor < "e" && ts[0] <= cursor {
			t.Errorf("cursor %q: starts at %q, not after the cursor", cursor, ts[0])
		}
	}
	ts, err := store.ClaimTenants("c", 3, tenantIndex(nil))
	if err != nil || len(ts) != 0 {
		t.Errorf("no tenants: %v %v", ts, err)
	}
}

func TestClaimTenantsErrors(t *testing.T) {
	t.Parallel()
	boom := errors.New("index gone")
	_, err := store.ClaimTenants("", 2, func(string, string, int) ([]string, error) { return nil, boom })
	if !errors.Is(err, boom) {
		t.Errorf("first probe error: %v", err)
	}
	calls := 0
	_, err = store.ClaimTenants("b", 5, func(after, upTo string, k int) ([]string, error) {
		calls++
		if calls == 2 {
			return nil, boom
		}
		return []string{"c"}, nil
	})
	if !errors.Is(err, boom) {
		t.Errorf("wrap-around probe error: %v", err)
	}
}

func TestClaimCursors(t *testing.T) {
	t.Parallel()
	var c store.ClaimCursors // the zero value is ready
	if got := c.Get("mail"); got != "" {
		t.Fatalf("fresh cursor %q", got)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := fmt.Sprintf("q%d", i%2)
			c.Set(q, fmt.Sprintf("t%d", i))
			_ = c.Get(q)
		}()
	}
	wg.Wait()
	c.Set("mail", "acme")
	c.Set("sms", "globex")
	if c.Get("mail") != "acme" || c.Get("sms") != "globex" {
		t.Errorf("cursors mail=%q sms=%q", c.Get("mail"), c.Get("sms"))
	}
}

func TestCurrentWindows(t *testing.T) {
	t.Parallel()
	now := t0.Add(5 * time.Second)
	current := rateLimit(store.FlowScope{Queue: "a"}, 10, t0, 4)
	past := rateLimit(store.FlowScope{Queue: "b"}, 10, t0.Add(-2*time.Minute), 9)
	conc := &store.Limit{FlowScope: store.FlowScope{Queue: "c"}, Concurrency: 1, WindowUsed: 3}
	store.CurrentWindows([]*store.Limit{current, past, conc}, now)
	if !current.WindowStart.Equal(t0) || current.WindowUsed != 4 {
		t.Errorf("current window changed: %v %d", current.WindowStart, current.WindowUsed)
	}
	if !past.WindowStart.Equal(t0) || past.WindowUsed != 0 {
		t.Errorf("past window not moved: %v %d", past.WindowStart, past.WindowUsed)
	}
	if !conc.WindowStart.IsZero() || conc.WindowUsed != 3 {
		t.Errorf("a limit without a rate was touched: %+v", conc)
	}
}

func TestSortScopes(t *testing.T) {
	t.Parallel()
	s := []store.FlowScope{{Queue: "b", Tenant: "x"}, {Queue: "a", Tenant: "z"}, {Queue: "b"}, {Queue: "a", Tenant: "y"}}
	store.SortScopes(s)
	want := []store.FlowScope{{Queue: "a", Tenant: "y"}, {Queue: "a", Tenant: "z"}, {Queue: "b"}, {Queue: "b", Tenant: "x"}}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("sorted %v, want %v", s, want)
	}
}

// ClaimRoundsTurns: the claim's turns end before the first tenant whose
// first-round share a queue-wide limit or the claim's limit cut to nothing
// (the rotation's cursor must not pass it); without a cut they are the
// whole visit list.
func TestClaimRoundsTurns(t *testing.T) {
	claim := func(ts []string, ns []int) ([]*idemtype.JobRow, error) {
		var out []*idemtype.JobRow
		for i, tenant := range ts {
			for range ns[i] {
				out = append(out, &idemtype.JobRow{Tenant: tenant})
			}
		}
		return out, nil
	}
	for _, tc := range []struct {
		name    string
		running int // of the queue's concurrency of 3
		limit   int
		want    []string
		claimed int
	}{
		{"room for all", 0, 3, []string{"a", "b", "c"}, 3},
		{"room for one", 2, 8, []string{"a"}, 1},
		{"room for two, the first share takes both", 1, 8, []string{"a"}, 2},
		{"room for two, shares of one: c left out by the claim's limit", 1, 2, []string{"a", "b"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := &store.Limit{FlowScope: store.FlowScope{Queue: "q"}, Concurrency: 3, Running: tc.running}
			b := store.NewClaimBudget(t0, []*store.Limit{q}, nil)
			out, turns, err := store.ClaimRoundsTurns(b, "q", tc.limit, []string{"a", "b", "c"}, claim)
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != tc.claimed || !reflect.DeepEqual(turns, tc.want) {
				t.Fatalf("claimed %d, turns %v; want %d, %v", len(out), turns, tc.claimed, tc.want)
			}
		})
	}
}

// ClaimRoundsTurns without limits: claims of 4 among 3 tenants give shares
// of 2, so c is left out by the claim's own limit and is not a turn taken
// (the cursor passed it and c never ran).
func TestClaimRoundsTurnsClaimLimit(t *testing.T) {
	claim := func(ts []string, ns []int) ([]*idemtype.JobRow, error) {
		var out []*idemtype.JobRow
		for i, tenant := range ts {
			for range ns[i] {
				out = append(out, &idemtype.JobRow{Tenant: tenant})
			}
		}
		return out, nil
	}
	b := store.NewClaimBudget(t0, nil, nil)
	out, turns, err := store.ClaimRoundsTurns(b, "q", 4, []string{"a", "b", "c"}, claim)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 4 || !reflect.DeepEqual(turns, []string{"a", "b"}) {
		t.Fatalf("claimed %d, turns %v; want 4, [a b]", len(out), turns)
	}
}
