package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/webhook"
)

// TestDeliveryTargetNamingSubscription (both stores): a subscription is
// stored as the delivery target "topic/name", but a job cannot name it in
// its metadata ({"delivery_target": "orders/billing"}) and be pushed to
// the subscription's URL, signed with its secrets, as if it were an event
// of the topic. Enqueue refuses such a job with an *idem.InvalidError on
// "metadata": EnqueueRaw's error, EnqueueMany's (and EnqueueTx's) result
// for that job, BatchCreate's error on "jobs[i].metadata"; a job that
// named the name before the subscription held it is not pushed to the
// subscription either: it is dead at its first attempt, saying why.
// Before the fix both jobs were pushed to the subscription's receiver with
// a signature it accepts.
func TestDeliveryTargetNamingSubscription(t *testing.T) {
	t.Parallel()
	bothBundles(t, func() *idem.Config {
		cfg := deliveryConfig()
		cfg.MaxAttempts = 3
		return cfg
	}, testDeliveryTargetNamingSubscription)
}

func testDeliveryTargetNamingSubscription(t *testing.T, b *bundle) {
	ctx := context.Background()
	sec := mustSecret(t)
	sub := newReceiver(t, []webhook.Secret{sec}, func(int, http.ResponseWriter) {})
	queue := newReceiver(t, nil, func(int, http.ResponseWriter) {})
	if _, err := b.client.TargetPut(ctx, &idem.Target{Name: "queue", Queue: "hooks", URL: queue.srv.URL}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"billing"} {
		if _, err := b.client.SubscriptionPut(ctx, &idem.Subscription{Topic: "orders", Name: name, URL: sub.srv.URL,
			Secrets: []webhook.Secret{sec}}); err != nil {
			t.Fatal(err)
		}
	}
	meta := func(name string) *idem.EnqueueOpts {
		return &idem.EnqueueOpts{Queue: "hooks", Metadata: json.RawMessage(`{"delivery_target":"` + name + `"}`)}
	}
	var refused []int64 // the jobs of refusals that did not happen
	wantInvalid := func(what string, err error) {
		t.Helper()
		var inv *idem.InvalidError
		if !errors.As(err, &inv) || !strings.HasSuffix(inv.Field, "metadata") || !strings.Contains(err.Error(), "subscription") {
			t.Errorf("%s: err %v, want an InvalidError on metadata naming the subscription", what, err)
		}
	}
	res, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "x", Opts: meta("orders/billing")})
	wantInvalid("EnqueueRaw", err)
	if err == nil {
		refused = append(refused, res.Job.ID)
	}
	// EnqueueMany refuses the job in its result, as the store's refusals
	// of one job: the other is written.
	many, err := b.client.EnqueueMany(ctx, []idem.EnqueueParams{{Kind: "ok", Opts: meta("queue")}, {Kind: "x", Opts: meta("orders/billing")}})
	if err != nil || len(many) != 2 || many[0].Err != nil || many[0].Job == nil {
		t.Fatalf("EnqueueMany: %v, %+v: want the first job written", err, many)
	}
	wantInvalid("EnqueueMany", many[1].Err)
	if many[1].Job != nil {
		refused = append(refused, many[1].Job.ID)
	}
	ok := many[0].Job.ID
	batch, err := b.client.BatchCreate(ctx, idem.BatchCreateParams{Key: "b1", Jobs: []idem.EnqueueParams{{Kind: "x", Opts: meta("orders/billing")}}})
	wantInvalid("BatchCreate", err)
	if err == nil {
		for _, j := range batch.Jobs {
			refused = append(refused, j.ID)
		}
	}

	// Named before the subscription "later" existed: accepted.
	early, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "x", Opts: meta("orders/later")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.SubscriptionPut(ctx, &idem.Subscription{Topic: "orders", Name: "later", URL: sub.srv.URL,
		Secrets: []webhook.Secret{sec}}); err != nil {
		t.Fatal(err)
	}
	b.start(t)
	row := finished(t, b, early.Job.ID)
	if row.State != idem.StateDead || row.Attempt != 1 || !strings.Contains(row.LastError, `"orders/later"`) ||
		!strings.Contains(row.LastError, "subscription") {
		t.Errorf("the early job: %s after %d attempts, error %q; want dead at once, saying it names a subscription",
			row.State, row.Attempt, row.LastError)
	}
	for _, id := range refused {
		finished(t, b, id)
	}
	if row := finished(t, b, ok); row.State != idem.StateCompleted {
		t.Errorf("the job naming a target: %s (%s)", row.State, row.LastError)
	}
	if got, bad := sub.seen(); len(got) != 0 || bad != 0 {
		t.Errorf("the subscription's receiver got %d pushes it verified (and %d it did not) from jobs naming it", len(got), bad)
	}
}

// finished waits until job id is finished and returns it.
func finished(t *testing.T, b *bundle, id int64) *idem.JobRow {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	row, err := b.client.JobWait(ctx, id)
	if err != nil {
		t.Fatalf("wait for job %d: %v", id, err)
	}
	return row
}
