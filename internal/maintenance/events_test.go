package maintenance_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/maintenance"
	"github.com/idem-dev/idem/store"
)

// TestRetentionDeletesOldEvents: events past EventRetention leave the event
// log in batches; younger ones stay; 0 keeps every event.
func TestRetentionDeletesOldEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 25 {
		if _, _, err := st.EventInsert(ctx, &store.Event{Tenant: "t", Topic: "orders", Payload: json.RawMessage(`{}`),
			CreatedAt: t0.Add(time.Duration(i) * 24 * time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	now := t0.Add(100 * 24 * time.Hour) // events of days 0..9 are older than 90 days
	keep := maintenance.NewRetention(st, &maintenance.Config{Now: func() time.Time { return now }, Batch: 4})
	if n, err := keep.RunOnce(ctx); err != nil || n != 0 {
		t.Fatalf("without EventRetention: deleted %d (%v)", n, err)
	}
	r := maintenance.NewRetention(st, &maintenance.Config{Now: func() time.Time { return now }, Batch: 4,
		EventRetention: 90 * 24 * time.Hour})
	if n, err := r.RunOnce(ctx); err != nil || n != 10 {
		t.Fatalf("deleted %d (%v), want 10", n, err)
	}
	left, err := st.EventList(ctx, &store.EventListParams{Tenant: "t", Topic: "orders"})
	if err != nil || len(left) != 15 || !left[0].CreatedAt.Equal(t0.Add(10*24*time.Hour)) {
		t.Fatalf("left %d events (%v)", len(left), err)
	}
}
