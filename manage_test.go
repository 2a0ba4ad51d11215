package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/webhook"
)

func TestTargetManagement(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	sec, err := webhook.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	tg := &idem.Target{Name: "orders", Queue: "hooks", URL: "http://127.0.0.1:9/hook", Secrets: []webhook.Secret{sec}, Timeout: 5 * time.Second}
	if created, err := b.client.TargetPut(ctx, tg); err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	if created, err := b.client.TargetPut(ctx, tg); err != nil || created {
		t.Fatalf("replace: %v %v", created, err)
	}
	got, err := b.client.TargetGet(ctx, "", "orders")
	if err != nil || got.URL != tg.URL || got.Queue != "hooks" || got.SecretCount != 1 || len(got.Secrets) != 0 || got.Timeout != 5*time.Second {
		t.Fatalf("get: %+v %v", got, err)
	}
	// Another tenant sees nothing.
	if _, err := b.client.TargetGet(ctx, "acme", "orders"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("another tenant's target: %v", err)
	}
	if l, err := b.client.TargetList(ctx, "acme"); err != nil || len(l) != 0 {
		t.Fatalf("acme's targets: %v %v", l, err)
	}
	if l, err := b.client.TargetList(ctx, ""); err != nil || len(l) != 1 || len(l[0].Secrets) != 0 {
		t.Fatalf("list: %+v %v", l, err)
	}

	for _, tc := range []struct {
		name  string
		t     idem.Target
		field string
	}{
		{"no name", idem.Target{Queue: "q", URL: "http://127.0.0.1:9"}, "name"},
		{"neither queue nor kind", idem.Target{Name: "x", URL: "http://127.0.0.1:9"}, "queue"},
		{"bad queue", idem.Target{Name: "x", Queue: "a queue", URL: "http://127.0.0.1:9"}, "queue"},
		{"negative timeout", idem.Target{Name: "x", Kind: "k", URL: "http://127.0.0.1:9", Timeout: -time.Second}, "timeout"},
		{"not http", idem.Target{Name: "x", Kind: "k", URL: "ftp://127.0.0.1/"}, "url"},
		{"empty secret", idem.Target{Name: "x", Kind: "k", URL: "http://127.0.0.1:9", Secrets: []webhook.Secret{{}}}, "secrets"},
	} {
		_, err := b.client.TargetPut(ctx, &tc.t)
		var ie *idem.InvalidError
		if !errors.As(err, &ie) || ie.Field != tc.field {
			t.Errorf("%s: %v, want invalid %s", tc.name, err, tc.field)
		}
	}
	if _, err := b.client.TargetPut(ctx, nil); !errors.Is(err, idem.ErrInvalid) {
		t.Errorf("nil target: %v", err)
	}
	if l, _ := b.client.TargetList(ctx, ""); len(l) != 1 {
		t.Fatalf("refused targets were stored: %d", len(l))
	}
	if err := b.client.TargetDelete(ctx, "", "orders"); err != nil {
		t.Fatal(err)
	}
	if err := b.client.TargetDelete(ctx, "", "orders"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
}

func TestSubscriptionManagement(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	sub := &idem.Subscription{Topic: "orders", Name: "billing", URL: "http://127.0.0.1:9/b", EventTypes: []string{"order.paid"}}
	if created, err := b.client.SubscriptionPut(ctx, sub); err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	if _, err := b.client.SubscriptionPut(ctx, &idem.Subscription{Topic: "orders", Name: "audit", URL: "http://127.0.0.1:9/a"}); err != nil {
		t.Fatal(err)
	}
	got, err := b.client.SubscriptionGet(ctx, "", "orders", "billing")
	if err != nil || got.URL != sub.URL || len(got.EventTypes) != 1 || got.EventTypes[0] != "order.paid" || len(got.Secrets) != 0 {
		t.Fatalf("get: %+v %v", got, err)
	}
	list, err := b.client.SubscriptionList(ctx, "", "orders")
	if err != nil || len(list) != 2 || list[0].Name != "audit" || list[1].Name != "billing" {
		t.Fatalf("list by name: %+v %v", list, err)
	}
	if l, err := b.client.SubscriptionList(ctx, "", "invoices"); err != nil || len(l) != 0 {
		t.Fatalf("another topic: %v %v", l, err)
	}
	if _, err := b.client.SubscriptionGet(ctx, "acme", "orders", "billing"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("another tenant: %v", err)
	}
	// A published event reaches both subscriptions its type matches.
	res, err := b.client.Publish(ctx, &idem.Event{Topic: "orders", Type: "order.paid", Payload: json.RawMessage(`{}`)})
	if err != nil || res.Deliveries != 2 {
		t.Fatalf("publish: %+v %v", res, err)
	}
	res, err = b.client.Publish(ctx, &idem.Event{Topic: "orders", Type: "order.created", Payload: json.RawMessage(`{}`)})
	if err != nil || res.Deliveries != 1 {
		t.Fatalf("publish a type billing filters out: %+v %v", res, err)
	}
	if err := b.client.SubscriptionDelete(ctx, "", "orders", "billing"); err != nil {
		t.Fatal(err)
	}
	if err := b.client.SubscriptionDelete(ctx, "", "orders", "billing"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
	if res, _ := b.client.Publish(ctx, &idem.Event{Topic: "orders", Type: "order.paid", Payload: json.RawMessage(`{}`)}); res.Deliveries != 1 {
		t.Fatalf("deliveries after a delete: %d", res.Deliveries)
	}
}

func TestLimitDelete(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	scope := idem.FlowScope{Tenant: "acme", Queue: "mail"}
	if _, err := b.client.LimitPut(ctx, idem.Limit{FlowScope: scope, Concurrency: 2}); err != nil {
		t.Fatal(err)
	}
	if err := b.client.LimitDelete(ctx, scope); err != nil {
		t.Fatal(err)
	}
	if l, err := b.client.LimitList(ctx, ""); err != nil || len(l) != 0 {
		t.Fatalf("limits after delete: %v %v", l, err)
	}
	if err := b.client.LimitDelete(ctx, scope); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
	if err := b.client.LimitDelete(ctx, idem.FlowScope{}); !errors.Is(err, idem.ErrInvalid) {
		t.Fatalf("delete without a scope: %v", err)
	}
}

// TestRecordNamespaces: a job's idempotency key and a Do key with the same
// text never share a record; deleting one leaves the other, and a deleted
// Do key runs its function again.
func TestRecordNamespaces(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	if _, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "k", Opts: &idem.EnqueueOpts{IdempotencyKey: "same"}}); err != nil {
		t.Fatal(err)
	}
	runs := 0
	do := func() *idem.DoResult {
		t.Helper()
		r, err := b.client.Do(ctx, "same", func(context.Context) (any, error) { runs++; return map[string]int{"run": runs}, nil }, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := do(); r.WasCached || string(r.Result) != `{"run":1}` {
		t.Fatalf("first Do: %+v", r)
	}
	if r := do(); !r.WasCached || runs != 1 {
		t.Fatalf("second Do ran again: %+v", r)
	}
	jobRec, err := b.client.RecordGet(ctx, "", "same")
	if err != nil || jobRec.Status != idemtype.RecordInProgress || jobRec.JobID == 0 {
		t.Fatalf("job record: %+v %v", jobRec, err)
	}
	doRec, err := b.client.DoRecordGet(ctx, "", "same")
	if err != nil || doRec.Status != idemtype.RecordCompleted || doRec.JobID != 0 || string(doRec.Result) != `{"run":1}` {
		t.Fatalf("Do record: %+v %v", doRec, err)
	}
	if err := b.client.DoRecordDelete(ctx, "", "same"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.RecordGet(ctx, "", "same"); err != nil {
		t.Fatalf("deleting the Do record deleted the job's: %v", err)
	}
	if r := do(); r.WasCached || runs != 2 {
		t.Fatalf("Do after its record was deleted: %+v", r)
	}
	if err := b.client.RecordDelete(ctx, "", "same"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.RecordGet(ctx, "", "same"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("deleted job record: %v", err)
	}
	if _, err := b.client.DoRecordGet(ctx, "", "same"); err != nil {
		t.Fatalf("deleting the job record deleted the Do record: %v", err)
	}
	if err := b.client.RecordDelete(ctx, "", "same"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
}

func TestDLQDelete(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	res, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "k", Opts: &idem.EnqueueOpts{Queue: "pull", MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	live, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "k", Args: json.RawMessage(`{"live":true}`)})
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := b.client.Claim(ctx, idem.ClaimParams{Queues: []string{"pull"}, WorkerID: "w"})
	if err != nil || len(jobs) != 1 {
		t.Fatal(jobs, err)
	}
	if _, err := b.client.Fail(ctx, "", jobs[0].ID, jobs[0].LeaseToken, idem.FailParams{Error: "boom"}); err != nil {
		t.Fatal(err)
	}
	if err := b.client.DLQDelete(ctx, "", live.Job.ID); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("delete of a live job: %v", err)
	}
	if err := b.client.DLQDelete(ctx, "acme", res.Job.ID); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("delete from another tenant: %v", err)
	}
	if err := b.client.DLQDelete(ctx, "", res.Job.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.JobGet(ctx, "", res.Job.ID); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("deleted job: %v", err)
	}
	if atts, err := b.client.JobAttempts(ctx, "", res.Job.ID); err == nil && len(atts) != 0 {
		t.Fatalf("attempts of a deleted job: %+v", atts)
	}
}

func TestValidateEnqueueWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		p     idem.EnqueueParams
		field string
	}{
		{"valid", idem.EnqueueParams{Kind: "k", Args: json.RawMessage(`{"a":1}`)}, ""},
		{"no kind", idem.EnqueueParams{}, "kind"},
		{"broken args", idem.EnqueueParams{Kind: "k", Args: json.RawMessage(`{`)}, "args"},
		{"negative attempts", idem.EnqueueParams{Kind: "k", Opts: &idem.EnqueueOpts{MaxAttempts: -1}}, "max_attempts"},
		{"bad queue", idem.EnqueueParams{Kind: "k", Opts: &idem.EnqueueOpts{Queue: "a b"}}, "queue"},
	} {
		err := b.client.ValidateEnqueue(tc.p)
		var ie *idem.InvalidError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.field != "" && (!errors.As(err, &ie) || ie.Field != tc.field):
			t.Errorf("%s: %v, want invalid %s", tc.name, err, tc.field)
		}
	}
	jobs, _, err := b.client.JobList(ctx, &idem.JobListParams{})
	if err != nil || len(jobs) != 0 {
		t.Fatalf("ValidateEnqueue wrote %d jobs (%v)", len(jobs), err)
	}
}

// TestJobReplayCopies: a replay with a limit copies the newest jobs the
// filter selects, enqueued oldest first; each copy keeps the original's
// kind, args, priority, attempts, partition, tenant and metadata, adds
// metadata.replay_of, and has no idempotency key; a copy of a copy names
// the copy. A bad target queue enqueues nothing.
func TestJobReplayCopies(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	c := b.client
	ctx := context.Background()
	opts := []*idem.EnqueueOpts{
		{Queue: "q"},
		{Queue: "q", Metadata: json.RawMessage(`{"region":"eu"}`)},
		{Queue: "q", Priority: 3, MaxAttempts: 7, PartitionKey: "p1"},
		{Queue: "q", IdempotencyKey: "orig-key", Metadata: json.RawMessage(`{"replay_of":"999","n":2}`)},
		{Queue: "q", Tenant: "other"},
	}
	var orig []*idem.JobRow
	for i, o := range opts {
		res, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "r", Args: json.RawMessage(`{"i":` + strconv.Itoa(i) + `}`), Opts: o})
		if err != nil {
			t.Fatal(err)
		}
		orig = append(orig, res.Job)
		// A replay copies finished jobs only.
		if _, err := c.JobCancel(ctx, o.Tenant, res.Job.ID); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := c.JobReplay(ctx, &idem.ReplayParams{Filter: idem.JobFilter{Kind: "r"}, Queue: "bad queue"}); !errors.Is(err, idem.ErrInvalid) || n != 0 {
		t.Fatalf("replay to a bad queue: %d %v", n, err)
	}
	n, err := c.JobReplay(ctx, &idem.ReplayParams{Filter: idem.JobFilter{Kind: "r", Queue: "q"}, Queue: "copies", Limit: 3})
	if err != nil || n != 3 {
		t.Fatalf("replay: %d %v, want 3", n, err)
	}
	copies, _, err := c.JobList(ctx, &idem.JobListParams{Filter: idem.JobFilter{Queue: "copies"}, Limit: 10})
	if err != nil || len(copies) != 3 {
		t.Fatalf("copies: %d %v", len(copies), err)
	}
	// Newest first in the list: the copies of originals 3, 2, 1 (the
	// default tenant's newest three), the copy of 1 enqueued first.
	for i, cp := range copies {
		o := orig[3-i]
		var meta map[string]any
		if err := json.Unmarshal(cp.Metadata, &meta); err != nil {
			t.Fatal(err)
		}
		if meta["replay_of"] != strconv.FormatInt(o.ID, 10) {
			t.Fatalf("copy %d is of %v, want %d", cp.ID, meta["replay_of"], o.ID)
		}
		if cp.Kind != o.Kind || string(cp.Args) != string(o.Args) || cp.Priority != o.Priority || cp.MaxAttempts != o.MaxAttempts ||
			cp.PartitionKey != o.PartitionKey || cp.Tenant != o.Tenant || cp.IdempotencyKey != "" || cp.Queue != "copies" {
			t.Fatalf("copy %+v of %+v", cp, o)
		}
		if i > 0 && cp.ID > copies[i-1].ID {
			t.Fatalf("copies out of order: %d after %d", cp.ID, copies[i-1].ID)
		}
	}
	var m0, m1, m2 map[string]any
	_ = json.Unmarshal(copies[0].Metadata, &m0)
	_ = json.Unmarshal(copies[1].Metadata, &m1)
	_ = json.Unmarshal(copies[2].Metadata, &m2)
	if m0["n"] != float64(2) || len(m0) != 2 || len(m1) != 1 || m2["region"] != "eu" || len(m2) != 2 {
		t.Fatalf("metadata kept: %v, %v and %v", m0, m1, m2)
	}
	if _, err := c.JobCancel(ctx, "", copies[0].ID); err != nil {
		t.Fatal(err)
	}
	n, err = c.JobReplay(ctx, &idem.ReplayParams{Filter: idem.JobFilter{Queue: "copies"}, Limit: 1})
	if err != nil || n != 1 {
		t.Fatalf("replay of a copy: %d %v", n, err)
	}
	again, _, err := c.JobList(ctx, &idem.JobListParams{Filter: idem.JobFilter{Queue: "copies"}, Limit: 10})
	if err != nil || len(again) != 4 {
		t.Fatalf("after replaying a copy: %d %v", len(again), err)
	}
	var meta map[string]any
	_ = json.Unmarshal(again[0].Metadata, &meta)
	if meta["replay_of"] != strconv.FormatInt(copies[0].ID, 10) {
		t.Fatalf("a copy of a copy names %v, want the copy %d", meta["replay_of"], copies[0].ID)
	}
}
