package idem_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/sqlitestore"
	"github.com/idem-dev/idem/webhook"
)

// forgedArgs is a typed job whose kind is a subscription's delivery kind.
type forgedArgs struct {
	Payload json.RawMessage `json:"payload"`
}

func (forgedArgs) Kind() string { return "topic:orders/billing" }

// forgedPayload marks the args of every forged job: a receiver that ever
// sees it accepted a forged event.
const forgedPayload = `{"amount":-1000000}`

// enqueueTxFunc runs EnqueueTx in a transaction of one store and commits it.
type enqueueTxFunc func(ctx context.Context, c *idem.Client, items []idem.EnqueueParams) ([]idem.EnqueueResult, error)

// TestTopicKindForgedPush (both stores): a subscription's delivery jobs
// have the kind "topic:<topic>/<name>", and delivery matches a job to the
// subscription by that kind, pushing it signed with the subscription's
// secret. A job of that kind enqueued through the public API (Enqueue,
// EnqueueRaw, EnqueueMany, EnqueueTx, BatchCreate's jobs and completion
// job, a schedule's job) is refused with an *idem.InvalidError on "kind",
// and nothing is written; Publish's fan-out, EventReplay and JobReplay of
// a delivery job still reach the subscription. The subscriber is a real
// HTTP receiver on 127.0.0.1 that verifies every signature. Before the
// fix, every forged job was pushed to it with a signature it accepted.
func TestTopicKindForgedPush(t *testing.T) {
	t.Parallel()
	cfg := func() *idem.Config {
		c := topicConfig()
		c.Queues["hooks"] = idem.QueueConfig{MaxWorkers: 10, Deliver: true}
		c.MaxAttempts = 3
		return c
	}
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		b := setup(t, cfg())
		testTopicKindForgedPush(t, b, func(ctx context.Context, c *idem.Client, items []idem.EnqueueParams) (res []idem.EnqueueResult, err error) {
			txErr := b.store.WriteTx(ctx, func(ctx context.Context, tx *sqlitestore.Tx) error {
				res, err = idem.EnqueueTx(ctx, c, tx, items)
				return nil
			})
			return res, errors.Join(err, txErr)
		})
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		b, pool, _ := pgSetup(t, cfg())
		testTopicKindForgedPush(t, b, func(ctx context.Context, c *idem.Client, items []idem.EnqueueParams) (res []idem.EnqueueResult, err error) {
			txErr := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				res, err = idem.EnqueueTx(ctx, c, tx, items)
				return nil
			})
			return res, errors.Join(err, txErr)
		})
	})
}

func testTopicKindForgedPush(t *testing.T, b *bundle, enqueueTx enqueueTxFunc) {
	ctx := context.Background()
	sec := mustSecret(t)
	recv := newReceiver(t, []webhook.Secret{sec}, func(_ int, w http.ResponseWriter) { w.WriteHeader(http.StatusNoContent) })
	if _, err := b.client.SubscriptionPut(ctx, &idem.Subscription{Topic: "orders", Name: "billing", URL: recv.srv.URL,
		Secrets: []webhook.Secret{sec}}); err != nil {
		t.Fatal(err)
	}
	args := json.RawMessage(`{"event_id":"1","topic":"orders","type":"order.refunded","payload":` + forgedPayload + `}`)
	forged := func(queue string) idem.EnqueueParams {
		return idem.EnqueueParams{Kind: "topic:orders/billing", Args: args, Opts: &idem.EnqueueOpts{Queue: queue}}
	}
	var leaked []int64 // jobs of the refusals that did not happen
	wantKind := func(what, field string, err error) {
		t.Helper()
		var inv *idem.InvalidError
		if !errors.As(err, &inv) || inv.Field != field || !errors.Is(err, idem.ErrInvalid) || !strings.Contains(inv.Reason, `"topic:"`) {
			t.Errorf("%s: err %v, want an InvalidError on %q naming the reserved prefix", what, err, field)
		}
	}
	collect := func(res []idem.EnqueueResult) {
		for _, r := range res {
			if r.Job != nil && r.Job.Kind == "topic:orders/billing" {
				leaked = append(leaked, r.Job.ID)
			}
		}
	}

	res, err := b.client.Enqueue(ctx, forgedArgs{Payload: json.RawMessage(forgedPayload)}, &idem.EnqueueOpts{Queue: "hooks"})
	wantKind("Enqueue", "kind", err)
	if err == nil {
		leaked = append(leaked, res.Job.ID)
	}
	for _, q := range []string{"hooks", idem.DefaultTopicQueue} {
		res, err := b.client.EnqueueRaw(ctx, forged(q))
		wantKind("EnqueueRaw to "+q, "kind", err)
		if err == nil {
			leaked = append(leaked, res.Job.ID)
		}
	}
	if err := b.client.ValidateEnqueue(forged("hooks")); err == nil {
		t.Error("ValidateEnqueue accepted the kind of a subscription's deliveries")
	}
	// EnqueueMany and EnqueueTx: invalid input fails the whole call,
	// nothing written.
	ok := idem.EnqueueParams{Kind: "ok", Opts: &idem.EnqueueOpts{Queue: "nobody"}}
	many, err := b.client.EnqueueMany(ctx, []idem.EnqueueParams{ok, forged("hooks")})
	wantKind("EnqueueMany", "kind", err)
	collect(many)
	txRes, err := enqueueTx(ctx, b.client, []idem.EnqueueParams{ok, forged("hooks")})
	wantKind("EnqueueTx", "kind", err)
	collect(txRes)
	batch, err := b.client.BatchCreate(ctx, idem.BatchCreateParams{Key: "b1", Jobs: []idem.EnqueueParams{forged("hooks")}})
	wantKind("BatchCreate", "jobs[0].kind", err)
	if err == nil {
		for _, j := range batch.Jobs {
			leaked = append(leaked, j.ID)
		}
	}
	of := forged("hooks")
	_, err = b.client.BatchCreate(ctx, idem.BatchCreateParams{Key: "b2", Jobs: []idem.EnqueueParams{ok}, OnFinish: &of})
	// A completion job written anyway waits for its batch's job, which
	// no worker runs: it is found by the list below, not waited for.
	wantKind("BatchCreate on_finish", "on_finish.kind", err)
	_, err = b.client.SchedulePut(ctx, &idem.Schedule{Name: "forge", Every: time.Hour, Kind: "topic:orders/billing",
		Args: args, Queue: "hooks"})
	wantKind("SchedulePut", "kind", err)
	if err == nil {
		res, err := b.client.ScheduleTrigger(ctx, "", "forge", nil)
		if err == nil {
			leaked = append(leaked, res.Job.ID)
		}
	}
	// A schedule stored before the refusal (by an older version) fires
	// nothing: its trigger is refused, and so is each of its firings.
	if _, err := b.client.Store().ScheduleUpsert(ctx, &store.ScheduleUpsertParams{Tenant: idem.DefaultTenant, Name: "old",
		Spec: json.RawMessage(`{"every":"1m0s","kind":"topic:orders/billing","queue":"hooks","args":` + string(args) + `}`),
		Now:  time.Now().Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	res, err = b.client.ScheduleTrigger(ctx, "", "old", nil)
	wantKind("ScheduleTrigger of a schedule stored before", "kind", err)
	if err == nil {
		leaked = append(leaked, res.Job.ID)
	}
	if n, _ := idem.RunSchedulerOnce(b.client); n != 0 {
		t.Errorf("the scheduler fired %d schedules of the kind topic:orders/billing", n)
	}
	jobs, _, err := b.client.JobList(ctx, &idem.JobListParams{Filter: idem.JobFilter{Kind: "topic:orders/billing"}, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 0 {
		t.Errorf("%d jobs of the kind topic:orders/billing written by the refused enqueues", len(jobs))
	}

	// The fan-out, a replay of the event and a replay of the delivery job
	// keep the subscription's kind and reach it.
	pub, err := b.client.Publish(ctx, &idem.Event{Topic: "orders", Type: "order.paid", Payload: json.RawMessage(`{"amount":1200}`)})
	if err != nil || pub.Deliveries != 1 {
		t.Fatalf("publish: %+v %v", pub, err)
	}
	// A replay copies finished jobs only: the delivery runs first.
	b.start(t)
	key := fmt.Sprintf("event-%d/billing", pub.Event.ID)
	first, _, err := b.client.JobList(ctx, &idem.JobListParams{Filter: idem.JobFilter{Kind: "topic:orders/billing", IdempotencyKey: key}, Limit: 10})
	if err != nil || len(first) != 1 {
		t.Fatalf("the delivery job of the event: %d, %v", len(first), err)
	}
	finished(t, b, first[0].ID)
	n, err := b.client.JobReplay(ctx, &idem.ReplayParams{Filter: idem.JobFilter{Kind: "topic:orders/billing",
		IdempotencyKey: key}})
	if err != nil || n != 1 {
		t.Fatalf("JobReplay of the delivery: %d copies, %v; want 1", n, err)
	}
	rep, err := b.client.EventReplay(ctx, &idem.EventFilter{Topic: "orders"}, "")
	if err != nil || rep.Deliveries != 1 {
		t.Fatalf("EventReplay: %+v %v", rep, err)
	}
	jobs, _, err = b.client.JobList(ctx, &idem.JobListParams{Filter: idem.JobFilter{Kind: "topic:orders/billing"}, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	genuine := 0
	for _, j := range jobs {
		if bytes.Contains(j.Args, []byte(forgedPayload)) {
			continue // a leaked job: waited for below
		}
		row := finished(t, b, j.ID)
		genuine++
		if row.State != idem.StateCompleted {
			t.Errorf("delivery job %d (metadata %s): %s (%s), want completed", j.ID, j.Metadata, row.State, row.LastError)
		}
	}
	for _, id := range leaked {
		finished(t, b, id)
	}
	if genuine != 3 {
		t.Errorf("%d genuine delivery jobs, want 3 (publish, job replay, event replay)", genuine)
	}
	got, bad := recv.seen()
	forgedSeen := 0
	for _, r := range got {
		if bytes.Contains(r.body, []byte(forgedPayload)) {
			forgedSeen++
		}
	}
	if forgedSeen != 0 || bad != 0 || len(got) != 3 {
		t.Errorf("the subscriber verified %d pushes, %d of them forged (and refused %d bad signatures); want the 3 genuine only",
			len(got), forgedSeen, bad)
	}
}
