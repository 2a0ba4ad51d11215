package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/idem-dev/idem/store"
)

// TestEventListMetaFilterSkipsNULMetadata: an event whose metadata holds a
// \u0000 escape (refused at publish, but older rows may hold one) cannot be
// read by PostgreSQL's JSON functions; a metadata filter over its topic
// skips it instead of failing with SQLSTATE 22P05.
func TestEventListMetaFilterSkipsNULMetadata(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestStore(t, 2)
	db, err := s.db()
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, meta := range []string{`{"region":"eu\u0000"}`, `{"region":"eu","n":"\\u0000"}`} {
		if _, err := db.Exec(ctx, s.sql(`INSERT INTO {schema}.events (tenant, topic, event_key, type, partition_key, payload, metadata, created_at, deliveries)
VALUES ('t', 'orders', '', '', '', '{}', $1::json, $2, 0)`), meta, at); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range []string{"eu", "us"} {
		list, err := s.EventList(ctx, &store.EventListParams{Tenant: "t", Topic: "orders", MetaKey: "region", MetaValue: v})
		if err != nil {
			t.Fatalf("list region=%s: %v", v, err)
		}
		want := 0
		if v == "eu" {
			want = 1 // the escaped backslash before u0000, not the NUL
		}
		if len(list) != want || (want == 1 && string(list[0].Metadata) != `{"region":"eu","n":"\\u0000"}`) {
			t.Errorf("region=%s: %d events, want %d", v, len(list), want)
		}
	}
}
