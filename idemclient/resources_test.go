package idemclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemclient"
)

// The management resources over a real server: the DLQ, records and
// result leases, limits and pauses, schedules, targets, topics, batches,
// readiness and health (helpers in api_test.go).
func TestDLQ(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	ctx := context.Background()
	var dead []string
	for _, code := range []string{"A", "A", "B"} {
		e.enqueue(e.admin, &idemclient.EnqueueRequest{Kind: "k", Queue: "q"})
		j := e.claimOne(e.admin, "q")
		if _, err := e.admin.Fail(ctx, j.ID, j.LeaseToken, &idemclient.FailRequest{Error: "bad", NoRetry: true, ErrorCode: code}); err != nil {
			t.Fatal(err)
		}
		dead = append(dead, j.ID)
	}
	live := e.enqueue(e.admin, &idemclient.EnqueueRequest{Kind: "k", Queue: "live"})

	page, err := e.admin.DLQList(ctx, &idemclient.ListParams{Filter: idemclient.Filter{States: []string{"available"}}})
	if err != nil || len(page.Jobs) != 3 {
		t.Fatalf("DLQList ignores a state filter: %d jobs %v", len(page.Jobs), err)
	}
	// Resolve one: it stays dead, out of the unresolved list.
	r, err := e.admin.DLQResolve(ctx, dead[2], "bad input, told the customer")
	if err != nil || r.State != "dead" || r.ResolvedAt == nil || r.ResolutionNote != "bad input, told the customer" {
		t.Fatalf("resolve: %+v %v", r, err)
	}
	if _, err := e.admin.DLQResolve(ctx, live.ID, ""); err == nil {
		t.Fatal("resolved a job that is not dead")
	}
	unresolved, err := e.admin.DLQList(ctx, &idemclient.ListParams{Filter: idemclient.Filter{Resolved: ptr(false)}})
	if err != nil || len(unresolved.Jobs) != 2 {
		t.Fatalf("unresolved: %+v %v", unresolved, err)
	}
	// Requeue by filter (ids empty): only code A.
	n, err := e.admin.DLQRequeue(ctx, nil, &idemclient.Filter{ErrorCode: "A"})
	if err != nil || n != 2 {
		t.Fatalf("requeue by code: %d %v", n, err)
	}
	j, _ := e.admin.GetJob(ctx, dead[0])
	if j.State != "available" || j.Attempt != 0 {
		t.Fatalf("requeued job %+v, want available with its attempts reset", j)
	}
	// Delete: only a dead job.
	if err := e.admin.DLQDelete(ctx, live.ID); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("delete of a live job: %v", err)
	}
	if err := e.admin.DLQDelete(ctx, dead[2]); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.GetJob(ctx, dead[2]); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("deleted job: %v", err)
	}
}

func TestRecordsAndLeases(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	ctx := context.Background()
	e.enqueue(e.admin, &idemclient.EnqueueRequest{Kind: "k", Queue: "q", IdempotencyKey: "order-1"})
	j := e.claimOne(e.admin, "q")
	if _, err := e.admin.Complete(ctx, j.ID, j.LeaseToken, json.RawMessage(`{"total":42}`)); err != nil {
		t.Fatal(err)
	}
	rec, err := e.admin.GetRecord(ctx, "order-1")
	if err != nil || rec.Status != "completed" || rec.JobID != j.ID || rec.ResultHash == "" || rec.Result != nil || rec.CompletedAt == nil {
		t.Fatalf("record: %+v %v", rec, err)
	}
	rec, err = e.admin.GetRecordResult(ctx, "order-1")
	if err != nil || string(rec.Result) != `{"total":42}` {
		t.Fatalf("record with result: %+v %v", rec, err)
	}
	if _, err := e.admin.GetRecord(ctx, "nope"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("missing record: %v", err)
	}
	if err := e.admin.DeleteRecord(ctx, "nope"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("delete missing record: %v", err)
	}

	// A lease: run, renew, complete; the next caller gets the result.
	l, err := e.admin.LeaseAcquire(ctx, "report-7", time.Minute, time.Hour)
	if err != nil || !l.Acquired || l.Cached || l.LeaseToken == "" || l.LeaseExpiresAt == nil {
		t.Fatalf("acquire: %+v %v", l, err)
	}
	until, err := e.admin.LeaseRenew(ctx, "report-7", l.LeaseToken, time.Hour)
	if err != nil || !until.After(*l.LeaseExpiresAt) {
		t.Fatalf("renew: %v %v", until, err)
	}
	if _, err := e.admin.LeaseRenew(ctx, "report-7", "wrong", time.Hour); !errors.Is(err, idem.ErrLeaseLost) {
		t.Fatalf("renew with a wrong token: %v", err)
	}
	if _, err := e.admin.LeaseComplete(ctx, "report-7", l.LeaseToken, json.RawMessage(`{"rows":3}`), 1500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	c, err := e.admin.LeaseAcquire(ctx, "report-7", 0, 0)
	if err != nil || c.Acquired || !c.Cached || string(c.Result) != `{"rows":3}` || c.DurationMS == nil || *c.DurationMS != 1500 {
		t.Fatalf("cached: %+v %v", c, err)
	}
	// A released lease caches nothing: the next caller runs the work.
	l, err = e.admin.LeaseAcquire(ctx, "flaky", time.Minute, 0)
	if err != nil || !l.Acquired {
		t.Fatal(l, err)
	}
	if err := e.admin.LeaseRelease(ctx, "flaky", l.LeaseToken); err != nil {
		t.Fatal(err)
	}
	if l2, err := e.admin.LeaseAcquire(ctx, "flaky", time.Minute, 0); err != nil || !l2.Acquired || l2.LeaseToken == l.LeaseToken {
		t.Fatalf("after release: %+v %v", l2, err)
	}

	st, err := e.admin.RecordStats(ctx)
	if err != nil || st.Entries < 2 || st.Completed < 2 || st.InProgress < 1 {
		t.Fatalf("record stats: %+v %v", st, err)
	}
	if err := e.admin.DeleteRecord(ctx, "order-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.GetRecord(ctx, "order-1"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("deleted record: %v", err)
	}
}

func TestLimitsAndPauses(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	ctx := context.Background()
	queue := idemclient.LimitScope{Queue: "mail"}
	tenant := idemclient.LimitScope{Tenant: "acme"}
	both := idemclient.LimitScope{Tenant: "acme", Queue: "sms"}

	l, err := e.admin.LimitPut(ctx, queue, idemclient.LimitRequest{Rate: ptr("100/1m"), Concurrency: ptr(5)})
	if err != nil || l.Queue != "mail" || l.Tenant != "" || l.Rate != "100/1m" || l.Concurrency != 5 {
		t.Fatalf("put queue limit: %+v %v", l, err)
	}
	if _, err := e.admin.LimitPut(ctx, tenant, idemclient.LimitRequest{Weight: ptr(3)}); err != nil {
		t.Fatal(err)
	}
	if l, err := e.admin.LimitPut(ctx, both, idemclient.LimitRequest{Concurrency: ptr(1)}); err != nil || l.Tenant != "acme" || l.Queue != "sms" {
		t.Fatalf("put tenant-in-queue limit: %+v %v", l, err)
	}
	if _, err := e.admin.LimitPut(ctx, queue, idemclient.LimitRequest{Rate: ptr("lots")}); !errors.Is(err, idem.ErrInvalid) {
		t.Fatalf("bad rate: %v", err)
	}
	if _, err := e.admin.LimitPut(ctx, queue, idemclient.LimitRequest{Weight: ptr(2)}); !errors.Is(err, idem.ErrInvalid) {
		t.Fatalf("weight on a queue: %v", err)
	}
	got, err := e.admin.LimitGet(ctx, both)
	if err != nil || got.Concurrency != 1 {
		t.Fatalf("get: %+v %v", got, err)
	}
	list, err := e.admin.LimitList(ctx)
	if err != nil || len(list) != 3 {
		t.Fatalf("list: %+v %v", list, err)
	}
	if err := e.admin.LimitDelete(ctx, both); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.LimitGet(ctx, both); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("deleted limit: %v", err)
	}
	if err := e.admin.LimitDelete(ctx, both); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}

	// A paused queue is not claimed from until resumed.
	p, err := e.admin.QueuePause(ctx, "mail", "")
	if err != nil || !p.Paused || p.Queue != "mail" || p.Tenant != "" {
		t.Fatalf("pause: %+v %v", p, err)
	}
	e.enqueue(e.admin, &idemclient.EnqueueRequest{Kind: "k", Queue: "mail"})
	if jobs, err := e.admin.Claim(ctx, &idemclient.ClaimRequest{Queues: []string{"mail"}, WorkerID: "w"}); err != nil || len(jobs) != 0 {
		t.Fatalf("claim from a paused queue: %v %v", jobs, err)
	}
	st, err := e.admin.Stats(ctx)
	if err != nil || len(st.Paused) != 1 || st.Paused[0].Queue != "mail" {
		t.Fatalf("stats paused: %+v %v", st, err)
	}
	if p, err := e.admin.QueueResume(ctx, "mail", ""); err != nil || p.Paused {
		t.Fatalf("resume: %+v %v", p, err)
	}
	if jobs, err := e.admin.Claim(ctx, &idemclient.ClaimRequest{Queues: []string{"mail"}, WorkerID: "w"}); err != nil || len(jobs) != 1 {
		t.Fatalf("claim after resume: %v %v", jobs, err)
	}
	// One tenant's work paused.
	if p, err := e.admin.QueuePause(ctx, "mail", "acme"); err != nil || p.Tenant != "acme" {
		t.Fatalf("pause acme: %+v %v", p, err)
	}
}

func TestSchedules(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	ctx := context.Background()
	s, err := e.admin.PutSchedule(ctx, "nightly", &idemclient.ScheduleRequest{Cron: "0 3 * * *", Timezone: "Europe/Paris",
		Queue: "reports", Kind: "report", Args: json.RawMessage(`{"full":true}`)})
	if err != nil || s.Name != "nightly" || s.Cron != "0 3 * * *" || s.Timezone != "Europe/Paris" || s.NextFireAt == nil || s.LastFiredAt != nil {
		t.Fatalf("put: %+v %v", s, err)
	}
	if _, err := e.admin.PutSchedule(ctx, "hourly", &idemclient.ScheduleRequest{Every: ptr("1h"), Kind: "tick"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.PutSchedule(ctx, "bad", &idemclient.ScheduleRequest{Cron: "61 * * * *", Kind: "k"}); !errors.Is(err, idem.ErrInvalid) {
		t.Fatalf("bad cron: %v", err)
	}
	if _, err := e.admin.PutSchedule(ctx, "fast", &idemclient.ScheduleRequest{Every: ptr("1s"), Kind: "k"}); !errors.Is(err, idem.ErrInvalid) {
		t.Fatalf("every 1s: %v", err)
	}
	list, err := e.admin.ListSchedules(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "hourly" || list[1].Name != "nightly" {
		t.Fatalf("list: %+v %v", list, err)
	}
	first, err := e.admin.TriggerSchedule(ctx, "nightly", "manual-1")
	if err != nil || first.Existing || first.Job.Kind != "report" || first.Job.Queue != "reports" {
		t.Fatalf("trigger: %+v %v", first, err)
	}
	again, err := e.admin.TriggerSchedule(ctx, "nightly", "manual-1")
	if err != nil || !again.Existing || again.Job.ID != first.Job.ID {
		t.Fatalf("trigger with the same key: %+v %v", again, err)
	}
	other, err := e.admin.TriggerSchedule(ctx, "nightly", "")
	if err != nil || other.Job.ID == first.Job.ID {
		t.Fatalf("trigger without a key: %+v %v", other, err)
	}
	got, err := e.admin.GetSchedule(ctx, "nightly")
	if err != nil || got.LastJobID != other.Job.ID {
		t.Fatalf("get: %+v %v", got, err)
	}
	if err := e.admin.DeleteSchedule(ctx, "nightly"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.GetSchedule(ctx, "nightly"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("deleted: %v", err)
	}
	if _, err := e.admin.TriggerSchedule(ctx, "nightly", ""); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("trigger deleted: %v", err)
	}
	// The jobs it made are kept.
	if j, err := e.admin.GetJob(ctx, first.Job.ID); err != nil || j.ID != first.Job.ID {
		t.Fatalf("job of a deleted schedule: %v", err)
	}
}

func TestTargets(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	ctx := context.Background()
	tg, created, err := e.admin.PutTarget(ctx, "orders", &idemclient.TargetPut{URL: "http://127.0.0.1:9/hook", Queue: "hooks", Timeout: ptr("5s")})
	if err != nil || !created || tg.Secret == "" || tg.SecretCount != 1 || tg.Timeout != "5s" {
		t.Fatalf("create: %+v %v %v", tg, created, err)
	}
	tg, created, err = e.admin.PutTarget(ctx, "orders", &idemclient.TargetPut{URL: "http://127.0.0.1:9/v2", Queue: "hooks", Secrets: &[]string{}})
	if err != nil || created || tg.Secret != "" || tg.SecretCount != 0 || tg.URL != "http://127.0.0.1:9/v2" {
		t.Fatalf("replace: %+v %v %v", tg, created, err)
	}
	if _, _, err := e.admin.PutTarget(ctx, "nowhere", &idemclient.TargetPut{URL: "http://127.0.0.1:9/"}); !errors.Is(err, idem.ErrInvalid) {
		t.Fatalf("target without queue or kind: %v", err)
	}
	list, err := e.admin.Targets(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "orders" || list[0].Secret != "" {
		t.Fatalf("list: %+v %v", list, err)
	}
	one, err := e.admin.Target(ctx, "orders")
	if err != nil || one.Name != "orders" || one.URL != "http://127.0.0.1:9/v2" || one.Secret != "" {
		t.Fatalf("get: %+v %v", one, err)
	}
	if err := e.admin.DeleteTarget(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	if err := e.admin.DeleteTarget(ctx, "orders"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
	if _, err := e.admin.Target(ctx, "orders"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("get a deleted target: %v", err)
	}
}

func TestTopics(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	ctx := context.Background()
	sub, created, err := e.admin.PutSubscription(ctx, "orders", "billing", &idemclient.SubscriptionPut{URL: "http://127.0.0.1:9/b", EventTypes: []string{"order.paid"}})
	if err != nil || !created || sub.Secret == "" || sub.Topic != "orders" || len(sub.EventTypes) != 1 {
		t.Fatalf("subscribe: %+v %v %v", sub, created, err)
	}
	if _, created, err := e.admin.PutSubscription(ctx, "orders", "billing", &idemclient.SubscriptionPut{URL: "http://127.0.0.1:9/b2", Secret: ptr("")}); err != nil || created {
		t.Fatalf("replace: %v %v", created, err)
	}
	subs, err := e.admin.Subscriptions(ctx, "orders")
	if err != nil || len(subs) != 1 || subs[0].URL != "http://127.0.0.1:9/b2" {
		t.Fatalf("subscriptions: %+v %v", subs, err)
	}
	// API.md's names: kinds and max_attempts, shown in the reply and the list.
	sub, _, err = e.admin.PutSubscription(ctx, "audit", "log", &idemclient.SubscriptionPut{URL: "http://127.0.0.1:9/a",
		Kinds: []string{"order.paid"}, MaxAttempts: 3})
	if err != nil || len(sub.Kinds) != 1 || sub.Kinds[0] != "order.paid" || sub.MaxAttempts != 3 {
		t.Fatalf("subscribe with kinds and max_attempts: %+v %v", sub, err)
	}
	if subs, err := e.admin.Subscriptions(ctx, "audit"); err != nil || len(subs) != 1 || subs[0].MaxAttempts != 3 || len(subs[0].Kinds) != 1 {
		t.Fatalf("audit subscriptions: %+v %v", subs, err)
	}
	if got, err := e.admin.Subscription(ctx, "audit", "log"); err != nil || got.Name != "log" || got.Topic != "audit" ||
		got.URL != "http://127.0.0.1:9/a" || got.MaxAttempts != 3 || got.Secret != "" {
		t.Fatalf("get subscription: %+v %v, want audit/log without its secret", got, err)
	}
	if err := e.admin.DeleteSubscription(ctx, "audit", "log"); err != nil {
		t.Fatal(err)
	}
	for _, tn := range [][2]string{{"audit", "log"}, {"audit", "billing"}, {"nothing", "log"}} {
		if got, err := e.admin.Subscription(ctx, tn[0], tn[1]); !errors.Is(err, idem.ErrNotFound) || got != nil {
			t.Fatalf("get subscription %s/%s: %+v %v, want ErrNotFound", tn[0], tn[1], got, err)
		}
	}

	var ids []string
	for i, typ := range []string{"order.paid", "order.shipped", "order.paid"} {
		r, err := e.admin.Publish(ctx, "orders", &idemclient.PublishRequest{Type: typ, PartitionKey: "o-1",
			Payload: json.RawMessage(`{"i":` + string(rune('0'+i)) + `}`)})
		if err != nil || r.EventID == "" || r.Deliveries != 1 {
			t.Fatalf("publish %d: %+v %v", i, r, err)
		}
		ids = append(ids, r.EventID)
	}
	k1, err := e.admin.Publish(ctx, "orders", &idemclient.PublishRequest{Key: "evt-1", Payload: json.RawMessage(`{}`)})
	if err != nil || k1.Existing {
		t.Fatalf("keyed publish: %+v %v", k1, err)
	}
	k2, err := e.admin.Publish(ctx, "orders", &idemclient.PublishRequest{Key: "evt-1", Payload: json.RawMessage(`{}`)})
	if err != nil || !k2.Existing || k2.EventID != k1.EventID {
		t.Fatalf("keyed publish again: %+v %v", k2, err)
	}

	// Pages of 2, oldest first.
	evs, cursor, err := e.admin.Events(ctx, "orders", "", nil, 2, "")
	if err != nil || len(evs) != 2 || cursor == "" || evs[0].ID != ids[0] || evs[1].ID != ids[1] {
		t.Fatalf("page 1: %+v %q %v", evs, cursor, err)
	}
	evs, cursor, err = e.admin.Events(ctx, "orders", "", nil, 2, cursor)
	if err != nil || len(evs) != 2 || evs[0].ID != ids[2] || evs[1].ID != k1.EventID || cursor != "" {
		t.Fatalf("page 2: %+v %q %v", evs, cursor, err)
	}
	evs, _, err = e.admin.Events(ctx, "orders", "o-1", []string{"order.shipped"}, 0, "")
	if err != nil || len(evs) != 1 || evs[0].ID != ids[1] || evs[0].PartitionKey != "o-1" || evs[0].CreatedAt.IsZero() {
		t.Fatalf("by partition and type: %+v %v", evs, err)
	}
	evs, _, err = e.admin.Events(ctx, "orders", "", []string{"order.paid", "order.shipped"}, 0, "")
	if err != nil || len(evs) != 3 {
		t.Fatalf("two types: %d events %v", len(evs), err)
	}

	rep, err := e.admin.ReplayEvents(ctx, "orders", &idemclient.EventReplayRequest{PartitionKey: "o-1", Types: []string{"order.paid"}})
	if err != nil || rep.Events != 2 || rep.Deliveries != 2 {
		t.Fatalf("replay: %+v %v", rep, err)
	}
	if err := e.admin.DeleteSubscription(ctx, "orders", "billing"); err != nil {
		t.Fatal(err)
	}
	if err := e.admin.DeleteSubscription(ctx, "orders", "billing"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
	if _, err := e.admin.Publish(ctx, "orders", &idemclient.PublishRequest{Payload: json.RawMessage(`{"a":`)}); err == nil {
		t.Fatal("published broken JSON")
	}
}

func TestBatchCancel(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	ctx := context.Background()
	b, err := e.admin.BatchCreate(ctx, "import-9", nil, []*idemclient.EnqueueRequest{
		{Kind: "row", Queue: "imp", Args: json.RawMessage(`{"row":1}`)}, {Kind: "row", Queue: "imp", Args: json.RawMessage(`{"row":2}`)}})
	if err != nil {
		t.Fatal(err)
	}
	j := e.claimOne(e.admin, "imp")
	if _, err := e.admin.Complete(ctx, j.ID, j.LeaseToken, nil); err != nil {
		t.Fatal(err)
	}
	if b.Batch.Total != 2 || b.Batch.Finished {
		t.Fatalf("create: %+v", b.Batch)
	}
	got, err := e.admin.BatchCancel(ctx, b.Batch.ID)
	if err != nil || got.Counts["completed"] != 1 || got.Counts["cancelled"] != 1 || !got.Finished || len(got.Jobs) != 2 {
		t.Fatalf("cancel: %+v %v", got, err)
	}
	if _, err := e.admin.BatchGet(ctx, "123456"); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("missing batch: %v", err)
	}
}

func TestReadyAndHealth(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	ctx := context.Background()
	if err := e.admin.Health(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := e.admin.Ready(ctx)
	if err != nil || r.Status == "" || len(r.Checks) == 0 {
		t.Fatalf("ready: %+v %v", r, err)
	}
	h, err := e.admin.HealthChecks(ctx)
	if err != nil || h.Status != "healthy" || len(h.Checks) == 0 {
		t.Fatalf("health: %+v %v", h, err)
	}
	// An unreachable server is an error, not a panic or a hang.
	e2, err := idemclient.New("http://127.0.0.1:1", &idemclient.Config{MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := e2.Health(ctx); err == nil {
		t.Fatal("health of a closed port")
	}
}

// TestDLQDeleteRetryChecksGone: a dead-letter delete whose first attempt
// failed answers 404 on its retry both when the first attempt deleted the
// job (its reply lost) and when the job is not dead (requeued meanwhile);
// only the first is success.
func TestDLQDeleteRetryChecksGone(t *testing.T) {
	t.Parallel()
	// through: the first DELETE of /v1/dlq/ reaches the server (and may
	// delete) and answers 503, as if its reply was lost; skip: it answers
	// 503 without reaching the server.
	var mode atomic.Value
	mode.Store("")
	var failed atomic.Bool
	e := newAPI(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodDelete || !strings.HasPrefix(r.URL.Path, "/v1/dlq/") || failed.Swap(true) {
				next.ServeHTTP(w, r)
				return
			}
			if mode.Load() == "through" {
				next.ServeHTTP(httptest.NewRecorder(), r)
			}
			w.WriteHeader(http.StatusServiceUnavailable)
		})
	})
	ctx := context.Background()
	cl := e.client("default", true, &idemclient.Config{MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond})
	e.enqueue(cl, &idemclient.EnqueueRequest{Kind: "k", Queue: "q"})
	j := e.claimOne(cl, "q")
	if _, err := cl.Fail(ctx, j.ID, j.LeaseToken, &idemclient.FailRequest{Error: "bad", NoRetry: true}); err != nil {
		t.Fatal(err)
	}
	live := e.enqueue(cl, &idemclient.EnqueueRequest{Kind: "k", Queue: "live"})

	mode.Store("skip")
	if err := cl.DLQDelete(ctx, live.ID); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("retried delete of a job that is not dead: %v, want not found", err)
	}
	if _, err := cl.GetJob(ctx, live.ID); err != nil {
		t.Fatalf("the live job after the delete: %v", err)
	}
	mode.Store("through")
	failed.Store(false)
	if err := cl.DLQDelete(ctx, j.ID); err != nil {
		t.Fatalf("retried delete whose first attempt deleted: %v", err)
	}
	if _, err := cl.GetJob(ctx, j.ID); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("deleted job: %v", err)
	}
}
