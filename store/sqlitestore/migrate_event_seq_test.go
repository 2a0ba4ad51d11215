package sqlitestore

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/idem-dev/idem/store"
)

// TestMigrateEventSeq: migration 0021 seeds the event id high-water mark
// from the newest event and from the delivery jobs of events retention
// already deleted (their keys "event-<id>/<subscription>" name the id), so
// the first event after the upgrade does not take such an id again.
func TestMigrateEventSeq(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	ctx := context.Background()
	for _, k := range []string{"event-41/billing", "event-9/billing", "event-x/y", "other"} {
		res, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{{Tenant: "default",
			Queue: "topics", Kind: "topic:orders/billing", Args: json.RawMessage(`{}`), MaxAttempts: 1, IdempotencyKey: k}}})
		if err != nil || res[0].Err != nil {
			t.Fatalf("insert job %s: %v %+v", k, err, res)
		}
	}
	// The state before 0021: event 7 is the newest event kept.
	err := s.write(ctx, 1, func(w *wtx) error {
		for _, q := range []string{`DROP TABLE event_seq`, `DELETE FROM schema_migrations WHERE version = 21`,
			`INSERT INTO events (id, tenant, topic, payload, created_at) VALUES (7, 'default', 'orders', '{}', 0)`} {
			if _, err := w.exec(q); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	e, _, err := s.EventInsert(ctx, &store.Event{Tenant: "default", Topic: "orders", Payload: json.RawMessage(`{}`), CreatedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if e.ID != 42 {
		t.Fatalf("the first event after 0021 got the id %d, want 42", e.ID)
	}
}
