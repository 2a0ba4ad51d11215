package idemhttp_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store"
)

// TestReplaySkipsForgedTopicKind (both stores): a finished job of the
// reserved kind prefix "topic:" that is no delivery of an event (inserted
// through the store, as a client could enqueue it before the prefix was
// refused) is not copied by POST /v1/jobs/replay, whose filter selects it
// by its kind, by its key or with every job of its queue: it is counted in
// skipped, and no job of that kind is made. Before, it was copied as a
// plain job of that kind, which delivery pushes to the subscription the
// kind names, signed.
func TestReplaySkipsForgedTopicKind(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, open opener) {
		e := setup(t, open, nil)
		ctx := context.Background()
		res, err := e.st.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{{
			Tenant: "a", Queue: idem.DefaultTopicQueue, Kind: "topic:orders/billing", MaxAttempts: 3,
			Args:           json.RawMessage(`{"event_id":"1","topic":"orders","type":"order.refunded","payload":{"amount":-1000000}}`),
			IdempotencyKey: "forged", Fingerprint: "forged",
		}}})
		if err != nil || res[0].Err != nil {
			t.Fatalf("insert: %v %v", err, res)
		}
		id := strconv.FormatInt(res[0].Job.ID, 10)
		expect(t, e.req("POST", "/v1/jobs/"+id+"/cancel", e.keyA, nil), 200, "")
		for _, filter := range []map[string]any{
			{"kind": "topic:orders/billing"},
			{"idempotency_key": "forged"},
			{"queue": idem.DefaultTopicQueue},
		} {
			r := e.req("POST", "/v1/jobs/replay", e.keyA, map[string]any{"filter": filter})
			expect(t, r, 200, "")
			if got := r.json(t); got["enqueued"] != float64(0) || got["skipped"] != float64(1) {
				t.Fatalf("replay by %v: %s; want 0 enqueued, 1 skipped", filter, r.body)
			}
		}
		r := e.req("GET", "/v1/jobs?kind=topic:orders/billing", e.keyA, nil)
		expect(t, r, 200, "")
		if jobs := r.json(t)["jobs"].([]any); len(jobs) != 1 {
			t.Fatalf("%d jobs of the kind topic:orders/billing after the replays, want the forged one only: %s", len(jobs), r.body)
		}
	})
}
