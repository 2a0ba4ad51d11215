package idemclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemclient"
)

// TestEveryResourceIsTenantScoped: what one tenant key creates (jobs,
// batches, records, leases, schedules, targets, subscriptions, limits it
// may read) another tenant key neither sees nor changes: 404, as if it did
// not exist (API.md).
func TestEveryResourceIsTenantScoped(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	ctx := context.Background()
	a := e.client("acme", false, nil)
	b := e.client("globex", false, nil)

	job := e.enqueue(a, &idemclient.EnqueueRequest{Kind: "k", Queue: "q", IdempotencyKey: "order-1"})
	batch, err := a.BatchCreate(ctx, "import-1", nil, []*idemclient.EnqueueRequest{{Kind: "row", Queue: "imp"}})
	if err != nil {
		t.Fatal(err)
	}
	lease, err := a.LeaseAcquire(ctx, "report-1", 0, 0)
	if err != nil || !lease.Acquired {
		t.Fatal(lease, err)
	}
	if _, err := a.PutSchedule(ctx, "nightly", &idemclient.ScheduleRequest{Cron: "0 3 * * *", Kind: "report"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.PutTarget(ctx, "hook", &idemclient.TargetPut{URL: "http://127.0.0.1:9/h", Queue: "q"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.PutSubscription(ctx, "orders", "billing", &idemclient.SubscriptionPut{URL: "http://127.0.0.1:9/b"}); err != nil {
		t.Fatal(err)
	}

	notFound := map[string]func() error{
		"get job":          func() error { _, err := b.GetJob(ctx, job.ID); return err },
		"cancel job":       func() error { _, err := b.CancelJob(ctx, job.ID); return err },
		"attempts":         func() error { _, err := b.Attempts(ctx, job.ID); return err },
		"get batch":        func() error { _, err := b.BatchGet(ctx, batch.Batch.ID); return err },
		"cancel batch":     func() error { _, err := b.BatchCancel(ctx, batch.Batch.ID); return err },
		"get record":       func() error { _, err := b.GetRecord(ctx, "order-1"); return err },
		"delete record":    func() error { return b.DeleteRecord(ctx, "order-1") },
		"get schedule":     func() error { _, err := b.GetSchedule(ctx, "nightly"); return err },
		"trigger schedule": func() error { _, err := b.TriggerSchedule(ctx, "nightly", ""); return err },
		"delete schedule":  func() error { return b.DeleteSchedule(ctx, "nightly") },
		"delete target":    func() error { return b.DeleteTarget(ctx, "hook") },
		"unsubscribe":      func() error { return b.DeleteSubscription(ctx, "orders", "billing") },
	}
	for name, call := range notFound {
		if err := call(); !errors.Is(err, idem.ErrNotFound) {
			t.Errorf("%s across tenants: %v, want not found", name, err)
		}
	}
	// A lease is held per tenant: the same key is free in another tenant.
	if l, err := b.LeaseAcquire(ctx, "report-1", 0, 0); err != nil || !l.Acquired {
		t.Errorf("the same lease key in another tenant: %+v %v", l, err)
	}
	// Lists show nothing of the other tenant.
	if p, err := b.ListJobs(ctx, nil); err != nil || len(p.Jobs) != 0 {
		t.Errorf("jobs: %v %v", p, err)
	}
	if s, err := b.ListSchedules(ctx); err != nil || len(s) != 0 {
		t.Errorf("schedules: %v %v", s, err)
	}
	if ts, err := b.Targets(ctx); err != nil || len(ts) != 0 {
		t.Errorf("targets: %v %v", ts, err)
	}
	if ss, err := b.Subscriptions(ctx, "orders"); err != nil || len(ss) != 0 {
		t.Errorf("subscriptions: %v %v", ss, err)
	}
	// Publishing to the same topic name reaches no subscription of acme's.
	if r, err := b.Publish(ctx, "orders", &idemclient.PublishRequest{Payload: json.RawMessage(`{}`)}); err != nil || r.Deliveries != 0 {
		t.Errorf("globex's publish: %+v %v", r, err)
	}
	// And everything is still there for its owner.
	if j, err := a.GetJob(ctx, job.ID); err != nil || j.State != "available" {
		t.Errorf("acme's job after globex's attempts: %+v %v", j, err)
	}
	if s, err := a.ListSchedules(ctx); err != nil || len(s) != 1 {
		t.Errorf("acme's schedules: %v %v", s, err)
	}
}

func TestSeedEdgeCases(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	ctx := context.Background()
	job := e.enqueue(e.admin, &idemclient.EnqueueRequest{Kind: "k", Queue: "q"})
	if _, err := e.admin.DLQResolve(ctx, job.ID, "not dead"); !errors.Is(err, idem.ErrWrongState) {
		t.Errorf("resolve a live job: %v", err)
	}
	if _, err := e.admin.DLQResolve(ctx, "987654", ""); !errors.Is(err, idem.ErrNotFound) {
		t.Errorf("resolve a missing job: %v", err)
	}
	if _, err := e.admin.BatchCreate(ctx, "empty", nil, nil); !errors.Is(err, idem.ErrInvalid) {
		t.Errorf("a batch without jobs: %v", err)
	}
	l, err := e.admin.LeaseAcquire(ctx, "k1", 0, 0)
	if err != nil || !l.Acquired {
		t.Fatal(l, err)
	}
	if err := e.admin.LeaseRelease(ctx, "k1", "not-the-token"); err == nil {
		if l2, err := e.admin.LeaseAcquire(ctx, "k1", 0, 0); err == nil && l2.Acquired {
			t.Error("a release with a wrong token freed the key")
		}
	}
	if _, err := e.admin.LeaseComplete(ctx, "k1", "not-the-token", json.RawMessage(`1`), 0); !errors.Is(err, idem.ErrLeaseLost) {
		t.Errorf("complete with a wrong token: %v", err)
	}
}
