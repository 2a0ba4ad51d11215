package idem_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store"
)

// TestRetryMaxBelowBaseRefused: a policy whose max — written or idem's
// default of 1 h — is below its base (written or the default 5 s) is
// refused, naming retry, base and max, at NewClient (Config.Retry,
// RetryByKind, RetryByQueue) and at an enqueue; it is never silently capped.
// An explicit schedule (Delays) has no cap to compare.
func TestRetryMaxBelowBaseRefused(t *testing.T) {
	t.Parallel()
	bad := []idem.RetryPolicy{
		{Base: 2 * time.Hour},                 // max not written: its default, 1 h, is below
		{Max: time.Second},                    // base not written: its default, 5 s, is above
		{Base: time.Minute, Max: time.Second}, // both written
	}
	for _, p := range bad {
		for name, cfg := range map[string]idem.Config{
			"Retry":        {Retry: p},
			"RetryByKind":  {RetryByKind: map[string]idem.RetryPolicy{"k": p}},
			"RetryByQueue": {RetryByQueue: map[string]idem.RetryPolicy{"q": p}},
		} {
			cfg.Logger = quietLogger()
			_, err := idem.NewClient(testStore(t), &cfg)
			if err == nil || !strings.Contains(err.Error(), "max") || !strings.Contains(err.Error(), "base") || !strings.Contains(err.Error(), name) {
				t.Errorf("%s %+v: NewClient error %v, want a refusal naming %s, max and base", name, p, err, name)
			}
		}
		b := setup(t, nil)
		pol := p
		_, err := b.client.SchedulePut(context.Background(), &idem.Schedule{Name: "s", Every: time.Hour, Kind: "k", Retry: &pol})
		if f := invalidField(err); f != "retry" {
			t.Errorf("schedule put %+v: %v (field %q), want an InvalidError on retry", p, err, f)
		}
		_, err = b.client.EnqueueRaw(context.Background(), idem.EnqueueParams{Kind: "k", Opts: &idem.EnqueueOpts{Retry: &pol}})
		if f := invalidField(err); f != "retry" || !strings.Contains(err.Error(), "max") || !strings.Contains(err.Error(), "base") {
			t.Errorf("enqueue %+v: %v (field %q), want an InvalidError on retry naming max and base", p, err, f)
		}
	}
	// Fine: max equal to base, a written max above a long base, and delays
	// past the default cap (an explicit schedule is not capped).
	b := setup(t, nil)
	for _, p := range []idem.RetryPolicy{
		{Base: time.Hour},
		{Base: 2 * time.Hour, Max: 8 * time.Hour},
		{Delays: []time.Duration{3 * time.Hour}, Max: time.Second},
	} {
		pol := p
		if _, err := b.client.EnqueueRaw(context.Background(), idem.EnqueueParams{Kind: "k", Opts: &idem.EnqueueOpts{Retry: &pol}}); err != nil {
			t.Errorf("enqueue %+v: %v", p, err)
		}
	}
}

// TestRetryStoredMaxBelowBaseDecodesCapped: a policy stored before such
// policies were refused (a schedule's, a job's) decodes as the delays it
// always gave — every one at the cap — so its schedule keeps firing and its
// job can be replayed.
func TestRetryStoredMaxBelowBaseDecodesCapped(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	for stored, base := range map[string]time.Duration{`{"base":"2h0m0s"}`: time.Hour, `{"max":"1s"}`: time.Second} {
		var p idem.RetryPolicy
		if err := json.Unmarshal([]byte(stored), &p); err != nil {
			t.Fatal(err)
		}
		if p.Base != base {
			t.Errorf("%s decoded as %+v, want base %s (the cap it always had)", stored, p, base)
		}
		for n := 1; n <= 3; n++ {
			if d := p.Delay(n, 0.5); d != base {
				t.Errorf("%s: delay %d = %s, want %s", stored, n, d, base)
			}
		}
		if _, err := b.client.EnqueueRaw(context.Background(), idem.EnqueueParams{Kind: "k", Opts: &idem.EnqueueOpts{Retry: &p}}); err != nil {
			t.Errorf("enqueue of the decoded %s: %v", stored, err)
		}
	}
}

// TestRetryStoredScheduleKeepsFiring: a schedule stored with a base above
// the default max (accepted before such policies were refused) still
// fires: its policy reads back capped, as it always behaved.
func TestRetryStoredScheduleKeepsFiring(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	if _, err := b.client.SchedulePut(ctx, &idem.Schedule{Name: "s", Every: time.Hour, Kind: "k",
		Retry: &idem.RetryPolicy{Base: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	row, err := b.store.ScheduleGet(ctx, &store.ScheduleGetParams{Tenant: idem.DefaultTenant, Name: "s"})
	if err != nil {
		t.Fatal(err)
	}
	legacy := strings.Replace(string(row.Spec), `"base":"1h0m0s"`, `"base":"2h0m0s"`, 1)
	if legacy == string(row.Spec) {
		t.Fatalf("stored spec %s has no base of 1h", row.Spec)
	}
	if _, err := b.store.ScheduleUpsert(ctx, &store.ScheduleUpsertParams{Tenant: idem.DefaultTenant, Name: "s",
		Spec: json.RawMessage(legacy)}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.ScheduleTrigger(ctx, "", "s", nil); err != nil {
		t.Fatalf("trigger of a schedule stored with base 2h and no max: %v", err)
	}
}
