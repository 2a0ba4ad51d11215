package idem_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store"
)

// TestJobReplaySkipsForgedTopicKinds (both stores): a finished job whose
// kind has the reserved prefix "topic:" but that is not a delivery of an
// event of the log to a subscription of its topic — a job a client
// enqueued under that kind before the prefix was refused, inserted here
// through the store as an older version did — is not copied by a job
// replay (a copy would be pushed to the subscription signed with its
// secrets): it is skipped and counted in Skipped, by a filter that selects
// everything, its kind or its key alone. A genuine delivery job is still
// copied, as is a plain job. Before, each forged job was copied.
func TestJobReplaySkipsForgedTopicKinds(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		b := setup(t, topicConfig())
		testJobReplaySkipsForgedTopicKinds(t, b.client, b.store)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		url, schema := dbtest.NewSchema(t)
		st := parentPG(t, url, schema)
		cfg := topicConfig()
		cfg.Workers, cfg.Logger = idem.NewWorkers(), quietLogger()
		client, err := idem.NewClient(st, cfg)
		if err != nil {
			t.Fatal(err)
		}
		testJobReplaySkipsForgedTopicKinds(t, client, st)
	})
}

func testJobReplaySkipsForgedTopicKinds(t *testing.T, c *idem.Client, st store.Store) {
	ctx := context.Background()
	for _, name := range []string{"billing", "audit"} {
		if _, err := c.SubscriptionPut(ctx, &idem.Subscription{Topic: "orders", Name: name, URL: "http://127.0.0.1:9/" + name,
			EventTypes: []string{"order.paid"}}); err != nil {
			t.Fatal(err)
		}
	}
	pub, err := c.Publish(ctx, &idem.Event{Topic: "orders", Type: "order.paid", Payload: json.RawMessage(`{"amount":1200}`)})
	if err != nil || pub.Deliveries != 2 {
		t.Fatalf("publish: %+v %v", pub, err)
	}
	other, err := c.Publish(ctx, &idem.Event{Topic: "orders", Type: "order.refunded", Payload: json.RawMessage(`{"amount":5}`)})
	if err != nil || other.Deliveries != 0 {
		t.Fatalf("publish of a type no subscription takes: %+v %v", other, err)
	}
	genuine, _, err := c.JobList(ctx, &idem.JobListParams{Filter: idem.JobFilter{Kind: "topic:orders/billing"}, Limit: 10})
	if err != nil || len(genuine) != 1 {
		t.Fatalf("the delivery job: %v %v", genuine, err)
	}
	envelope := func(ev *idem.Event) string {
		t.Helper()
		b, err := json.Marshal(idem.EventEnvelope{EventID: fmt.Sprint(ev.ID), Topic: ev.Topic, Type: ev.Type,
			Payload: ev.Payload, CreatedAt: ev.CreatedAt})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	forge := func(kind, key, args string) *store.JobInsertParams {
		meta := fmt.Sprintf(`{"event_id":"%d","topic":"orders","subscription":"billing","replay":false}`, pub.Event.ID)
		return &store.JobInsertParams{Tenant: "default", Queue: idem.DefaultTopicQueue, Kind: kind, Args: json.RawMessage(args),
			MaxAttempts: 3, Metadata: json.RawMessage(meta), IdempotencyKey: key, Fingerprint: key}
	}
	genuineArgs := envelope(pub.Event)
	forgedArgs := strings.Replace(genuineArgs, `{"amount":1200}`, `{"amount":-1000000}`, 1)
	res, err := st.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{
		forge("topic:orders/billing", "forged-payload", forgedArgs),                                                     // another payload
		forge("topic:orders/billing", "forged-event", strings.Replace(genuineArgs, `"event_id":"`, `"event_id":"9`, 1)), // no such event
		forge("topic:orders/nobody", "forged-subscription", genuineArgs),                                                // no such subscription
		forge("topic:orders/billing", "forged-type", envelope(other.Event)),                                             // a type billing does not take
		forge("topic:", "forged-empty", genuineArgs),                                                                    // no topic at all
		{Tenant: "default", Queue: "plain", Kind: "plain", Args: json.RawMessage(`{}`), MaxAttempts: 3},
	}})
	if err != nil {
		t.Fatal(err)
	}
	all := []int64{genuine[0].ID}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("insert: %v", r.Err)
		}
		all = append(all, r.Job.ID)
	}
	for _, id := range all { // finished: a replay copies finished jobs only
		if _, err := c.JobCancel(ctx, "", id); err != nil {
			t.Fatalf("cancel job %d: %v", id, err)
		}
	}
	copies := func() map[string]int64 { // kind → copies made by replays
		t.Helper()
		jobs, _, err := c.JobList(ctx, &idem.JobListParams{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, j := range jobs {
			if strings.Contains(string(j.Metadata), `"replay_of"`) {
				out[j.Kind]++
			}
		}
		return out
	}
	for _, c2 := range []struct {
		what                    string
		filter                  idem.JobFilter
		enqueued, skipped       int
		billing, plain, forgery int64 // copies made in all, after this replay
	}{
		{"by key of a forged job", idem.JobFilter{IdempotencyKey: "forged-payload"}, 0, 1, 0, 0, 0},
		{"by the subscription's kind", idem.JobFilter{Kind: "topic:orders/billing"}, 1, 3, 1, 0, 0},
		{"everything", idem.JobFilter{}, 2, 7, 2, 1, 0}, // 5 forged, 2 unfinished: audit's delivery, the copy
	} {
		rep, err := c.JobReplayReport(ctx, &idem.ReplayParams{Filter: c2.filter})
		if err != nil {
			t.Fatalf("replay %s: %v", c2.what, err)
		}
		if rep.Enqueued != c2.enqueued || rep.Skipped != c2.skipped {
			t.Errorf("replay %s: %+v, want %d enqueued and %d skipped", c2.what, rep, c2.enqueued, c2.skipped)
		}
		got := copies()
		forged := got["topic:orders/nobody"] + got["topic:"]
		if got["topic:orders/billing"] != c2.billing || got["plain"] != c2.plain || forged != c2.forgery {
			t.Errorf("after the replay %s: copies by kind %v, want %d of the delivery, %d plain, none forged",
				c2.what, got, c2.billing, c2.plain)
		}
	}
	// The delivery copies are the genuine one's: its args, no other.
	jobs, _, err := c.JobList(ctx, &idem.JobListParams{Filter: idem.JobFilter{Kind: "topic:orders/billing"}, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if strings.Contains(string(j.Args), "-1000000") && strings.Contains(string(j.Metadata), "replay_of") {
			t.Errorf("a copy of a forged job: %d %s", j.ID, j.Args)
		}
	}
}
