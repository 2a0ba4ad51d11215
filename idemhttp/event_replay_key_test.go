package idemhttp_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/pgstore"
)

// breakable is a store whose database can be made to refuse, by a trigger,
// the insert of a job of partition key "billing/boom" (as a database lost
// mid-write fails a statement): brk arms the trigger, heal drops it.
type breakable struct {
	name string
	open func(t *testing.T) (st store.Store, brk, heal func())
}

func breakables() []breakable {
	return []breakable{
		{"sqlite", func(t *testing.T) (store.Store, func(), func()) {
			st, exec := openSQLiteWithSQL(t)
			return st, func() {
					exec(`CREATE TRIGGER boom BEFORE INSERT ON jobs WHEN NEW.partition_key = 'billing/boom'
BEGIN SELECT RAISE(ABORT, 'boom: the database failed'); END`)
				}, func() {
					exec(`DROP TRIGGER boom`)
				}
		}},
		{"postgres", func(t *testing.T) (store.Store, func(), func()) {
			url, schema := dbtest.NewSchema(t)
			pool, err := pgxpool.New(context.Background(), url)
			if err != nil {
				t.Fatal(err)
			}
			st, err := pgstore.New(context.Background(), pool, &pgstore.Config{Schema: schema})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close(); pool.Close() })
			exec := func(q string) {
				if _, err := pool.Exec(context.Background(), q); err != nil {
					t.Fatal(err)
				}
			}
			s := `"` + schema + `"`
			return st, func() {
					exec(`CREATE FUNCTION ` + s + `.boom() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'boom: the database failed'; END $$`)
					exec(`CREATE TRIGGER boom BEFORE INSERT ON ` + s + `.jobs FOR EACH ROW
WHEN (NEW.partition_key = 'billing/boom') EXECUTE FUNCTION ` + s + `.boom()`)
				}, func() {
					exec(`DROP TRIGGER boom ON ` + s + `.jobs`)
				}
		}},
	}
}

// TestEventReplayRetriedWithTheSameKeyDeliversOnce: a topic replay sent
// with an Idempotency-Key fails at its second event (the database refuses
// that delivery) after the first event's delivery was committed; its retry
// with the same key (a failure is not stored by the middleware, so the
// replay runs again) completes the replay without delivering the first
// event twice. Before the fix replay deliveries had no key: the retry made
// a second delivery of the first event (a new webhook-id, so a
// deduplicating receiver processed it twice).
func TestEventReplayRetriedWithTheSameKeyDeliversOnce(t *testing.T) {
	t.Parallel()
	for _, b := range breakables() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			if b.name == "postgres" {
				dbtest.PostgresURL(t)
			}
			var brk, heal func()
			e := setup(t, func(t *testing.T) store.Store {
				var st store.Store
				st, brk, heal = b.open(t)
				return st
			}, nil)
			ctx := context.Background()
			sub := &idem.Subscription{Tenant: "a", Topic: "orders", Name: "billing", URL: "http://127.0.0.1:9/hook"}
			if _, err := e.client.SubscriptionPut(ctx, sub); err != nil {
				t.Fatal(err)
			}
			for _, pk := range []string{"one", "boom"} {
				r := e.req("POST", "/v1/topics/orders/events", e.keyA, map[string]any{"partition_key": pk, "payload": map[string]any{}})
				expect(t, r, 201, "")
			}
			brk()
			if r := e.req("POST", "/v1/topics/orders/replay", e.keyA, map[string]any{}, "Idempotency-Key", "rp-1"); r.status < 500 {
				t.Fatalf("replay through the failing database: %d %s", r.status, r.body)
			}
			heal()
			r := e.req("POST", "/v1/topics/orders/replay", e.keyA, map[string]any{}, "Idempotency-Key", "rp-1")
			expect(t, r, 200, "")
			if m := r.json(t); m["events"] != float64(2) || m["deliveries"] != float64(2) {
				t.Fatalf("retry: %s, want 2 events and 2 deliveries", r.body)
			}
			jobs, _, err := e.client.JobList(ctx, &idem.JobListParams{Filter: idem.JobFilter{Tenant: "a"}, Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			per := map[string]int{}
			for _, j := range jobs {
				per[j.PartitionKey]++
			}
			// Each event: its publish's delivery and one replay.
			if per["billing/one"] != 2 || per["billing/boom"] != 2 {
				t.Fatalf("delivery jobs per entity %v, want 2 each (the publish and one replay)", per)
			}
		})
	}
}
