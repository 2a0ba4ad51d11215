package idem_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/webhook"
)

// The management of subscriptions and of resolved dead letters through the
// Go library, on both stores.

func TestSubscriptionBoundaries(t *testing.T) {
	t.Parallel()
	bothBundles(t, func() *idem.Config { return nil }, testSubscriptionBoundaries)
}

// testSubscriptionBoundaries: refusals name their field; the list of a
// topic holds its subscriptions only (not a topic whose name it prefixes,
// not another tenant's, not plain targets), by name and without secrets;
// get and delete find one by topic and name.
func testSubscriptionBoundaries(t *testing.T, b *bundle) {
	ctx := context.Background()
	c := b.client
	secret := webhook.NewSecret([]byte("0123456789abcdef0123456789abcdef"))
	bad := []struct {
		name  string
		s     *idem.Subscription
		field string
	}{
		{"nil", nil, "subscription"},
		{"no topic", &idem.Subscription{Name: "a", URL: "http://127.0.0.1:9/hook"}, "topic"},
		{"topic with a space", &idem.Subscription{Topic: "or ders", Name: "a", URL: "http://127.0.0.1:9/hook"}, "topic"},
		{"no name", &idem.Subscription{Topic: "orders", URL: "http://127.0.0.1:9/hook"}, "name"},
		// "a" + "b/c" and "a/b" + "c" would both be the target "a/b/c".
		{"topic with a slash", &idem.Subscription{Topic: "a/b", Name: "c", URL: "http://127.0.0.1:9/hook"}, "topic"},
		{"name with a slash", &idem.Subscription{Topic: "a", Name: "b/c", URL: "http://127.0.0.1:9/hook"}, "name"},
		{"event type with a space", &idem.Subscription{Topic: "orders", Name: "a", URL: "http://127.0.0.1:9/hook",
			EventTypes: []string{"order.paid", "order shipped"}}, "event_types"},
		{"negative timeout", &idem.Subscription{Topic: "orders", Name: "a", URL: "http://127.0.0.1:9/hook", Timeout: -time.Second}, "timeout"},
		{"negative max attempts", &idem.Subscription{Topic: "orders", Name: "a", URL: "http://127.0.0.1:9/hook", MaxAttempts: -1}, "max_attempts"},
		{"max attempts over the bound", &idem.Subscription{Topic: "orders", Name: "a", URL: "http://127.0.0.1:9/hook",
			MaxAttempts: idem.MaxMaxAttempts + 1}, "max_attempts"},
		{"empty secret", &idem.Subscription{Topic: "orders", Name: "a", URL: "http://127.0.0.1:9/hook",
			Secrets: []webhook.Secret{secret, {}}}, "secrets"},
	}
	for _, tc := range bad {
		_, err := c.SubscriptionPut(ctx, tc.s)
		var inv *idem.InvalidError
		if !errors.As(err, &inv) || inv.Field != tc.field {
			t.Errorf("%s: %v, want invalid %s", tc.name, err, tc.field)
		}
	}
	put := func(s *idem.Subscription, wantCreated bool) {
		t.Helper()
		created, err := c.SubscriptionPut(ctx, s)
		if err != nil || created != wantCreated {
			t.Fatalf("put %s/%s: created %v %v, want %v", s.Topic, s.Name, created, err, wantCreated)
		}
	}
	put(&idem.Subscription{Topic: "orders", Name: "zeta", URL: "http://127.0.0.1:9/z", Secrets: []webhook.Secret{secret, secret}}, true)
	put(&idem.Subscription{Topic: "orders", Name: "alpha", URL: "http://127.0.0.1:9/a", EventTypes: []string{"order.paid"}}, true)
	put(&idem.Subscription{Topic: "orders", Name: "alpha", URL: "http://127.0.0.1:9/a2", Timeout: 3 * time.Second}, false)
	put(&idem.Subscription{Topic: "orders.eu", Name: "beta", URL: "http://127.0.0.1:9/b"}, true)
	put(&idem.Subscription{Tenant: "other", Topic: "orders", Name: "gamma", URL: "http://127.0.0.1:9/g"}, true)
	if _, err := c.TargetPut(ctx, &idem.Target{Name: "orders/plain", Queue: "q", URL: "http://127.0.0.1:9/p"}); err != nil {
		t.Fatal(err)
	}

	list, err := c.SubscriptionList(ctx, "", "orders")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list {
		names = append(names, s.Name)
		if s.Topic != "orders" || s.Tenant != "default" || len(s.Secrets) != 0 {
			t.Errorf("listed %+v", s)
		}
	}
	if strings.Join(names, ",") != "alpha,zeta" {
		t.Fatalf("orders lists %q, want alpha,zeta", names)
	}
	if a := list[0]; a.URL != "http://127.0.0.1:9/a2" || a.Timeout != 3*time.Second || len(a.EventTypes) != 0 || a.SecretCount != 0 {
		t.Errorf("alpha after its replacement: %+v", a)
	}
	if z := list[1]; z.SecretCount != 2 || z.URL != "http://127.0.0.1:9/z" {
		t.Errorf("zeta: %+v", z)
	}

	if s, err := c.SubscriptionGet(ctx, "", "orders.eu", "beta"); err != nil || s.Name != "beta" || s.Topic != "orders.eu" {
		t.Fatalf("get orders.eu/beta: %+v %v", s, err)
	}
	for _, miss := range [][3]string{{"", "orders", "beta"}, {"", "orders", "gamma"}, {"other", "orders", "alpha"}, {"", "nothing", "alpha"}} {
		if s, err := c.SubscriptionGet(ctx, miss[0], miss[1], miss[2]); !errors.Is(err, idem.ErrNotFound) {
			t.Errorf("get %v: %+v %v, want ErrNotFound", miss, s, err)
		}
	}
	if s, err := c.SubscriptionGet(ctx, "other", "orders", "gamma"); err != nil || s.Tenant != "other" {
		t.Fatalf("other tenant's gamma: %+v %v", s, err)
	}

	if err := c.SubscriptionDelete(ctx, "", "orders", "zeta"); err != nil {
		t.Fatal(err)
	}
	if err := c.SubscriptionDelete(ctx, "", "orders", "zeta"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("second delete: %v, want ErrNotFound", err)
	}
	if err := c.SubscriptionDelete(ctx, "", "orders", "gamma"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("delete of another tenant's subscription: %v, want ErrNotFound", err)
	}
	if list, err := c.SubscriptionList(ctx, "", "orders"); err != nil || len(list) != 1 || list[0].Name != "alpha" {
		t.Fatalf("after the delete: %+v %v", list, err)
	}

	// A plain target and a subscription of one stored name ("orders/alpha")
	// neither replace nor delete each other.
	var inv *idem.InvalidError
	if _, err := c.TargetPut(ctx, &idem.Target{Name: "orders/alpha", Queue: "q", URL: "http://127.0.0.1:9/p"}); !errors.As(err, &inv) || inv.Field != "name" {
		t.Fatalf("plain target named as a subscription: %v, want invalid name", err)
	}
	if err := c.TargetDelete(ctx, "", "orders/alpha"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("target delete of a subscription's name: %v, want ErrNotFound", err)
	}
	if _, err := c.SubscriptionPut(ctx, &idem.Subscription{Topic: "orders", Name: "plain", URL: "http://127.0.0.1:9/x"}); !errors.As(err, &inv) || inv.Field != "name" {
		t.Fatalf("subscription named as a plain target: %v, want invalid name", err)
	}
	if err := c.SubscriptionDelete(ctx, "", "orders", "plain"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("subscription delete of a plain target's name: %v, want ErrNotFound", err)
	}
	if s, err := c.SubscriptionGet(ctx, "", "orders", "alpha"); err != nil || s.URL != "http://127.0.0.1:9/a2" {
		t.Fatalf("alpha after the refused target put: %+v %v", s, err)
	}
	if tg, err := c.TargetGet(ctx, "", "orders/plain"); err != nil || tg.URL != "http://127.0.0.1:9/p" {
		t.Fatalf("the plain target after the refused subscription put: %+v %v", tg, err)
	}
}

// TestSubscriptionPutSameInstant: a second put of one subscription reports
// created = false on both stores even when the clock has not moved (an
// injected Config.Now); SQLite once decided from created_at = updated_at.
func TestSubscriptionPutSameInstant(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	for name, mk := range map[string]func(t *testing.T) *idem.Client{
		"sqlite": func(t *testing.T) *idem.Client {
			return setup(t, &idem.Config{Now: func() time.Time { return at }}).client
		},
		"postgres": func(t *testing.T) *idem.Client {
			b, _, _ := pgSetup(t, &idem.Config{Now: func() time.Time { return at }})
			return b.client
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := mk(t)
			sub := &idem.Subscription{Topic: "orders", Name: "billing", URL: "http://127.0.0.1:9/hook"}
			if created, err := c.SubscriptionPut(context.Background(), sub); err != nil || !created {
				t.Fatalf("first put: %v %v", created, err)
			}
			if created, err := c.SubscriptionPut(context.Background(), sub); err != nil || created {
				t.Fatalf("second put of the same subscription: created=%v %v", created, err)
			}
		})
	}
}

// TestDLQResolveRefusals: a note too long or not text is refused before
// the store is asked (seeds_test.go covers the states); a note of exactly
// the longest length passes on to the state check.
func TestDLQResolveRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	c := b.client
	live, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		id   int64
		note string
		want error
	}{
		{"note too long", live.Job.ID, strings.Repeat("n", idem.MaxResolutionNote+1), idem.ErrInvalid},
		{"note with NUL", live.Job.ID, "a\x00b", idem.ErrInvalid},
		{"note not UTF-8", live.Job.ID, "a\xffb", idem.ErrInvalid},
		{"a note too long for an unknown job", live.Job.ID + 1000, strings.Repeat("n", idem.MaxResolutionNote+1), idem.ErrInvalid},
	}
	for _, tc := range cases {
		if row, err := c.DLQResolve(ctx, "", tc.id, tc.note); !errors.Is(err, tc.want) || row != nil {
			t.Errorf("%s: %+v %v, want %v", tc.name, row, err, tc.want)
		}
	}
	if row, err := c.DLQResolve(ctx, "", live.Job.ID, strings.Repeat("n", idem.MaxResolutionNote)); !errors.Is(err, idem.ErrWrongState) {
		t.Fatalf("a note of the longest length is refused before the state is checked: %+v %v", row, err)
	}
	if j, err := c.JobGet(ctx, "", live.Job.ID); err != nil || j.State != idem.StateAvailable || j.ResolvedAt != nil {
		t.Fatalf("the live job changed: %+v %v", j, err)
	}
}

// TestJobErrorCode: an empty code leaves the error as it is; a nil error
// with a code still fails ("failed") and carries the code.
func TestJobErrorCode(t *testing.T) {
	t.Parallel()
	base := errors.New("boom")
	if err := idem.JobErrorCode("", base); err != base {
		t.Fatalf("empty code: %v, want the error itself", err)
	}
	if err := idem.JobErrorCode("", nil); err != nil {
		t.Fatalf("empty code, nil error: %v", err)
	}
	err := idem.JobErrorCode("BAD_INPUT", nil)
	var coded *idemtype.CodedError
	if err == nil || !errors.As(err, &coded) || coded.Code != "BAD_INPUT" || coded.Err == nil || coded.Err.Error() != "failed" {
		t.Fatalf("code with a nil error: %#v", err)
	}
	if err := idem.JobErrorCode("E", base); !errors.Is(err, base) {
		t.Fatalf("coded error does not wrap its error: %v", err)
	}
}
