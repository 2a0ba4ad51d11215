package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// eventCases are the cases of the event log; they run with the target cases.
func eventCases() []testCase {
	return []testCase{
		{"Events/insert-dedup-list-delete", testEventLog},
		{"Events/metadata-filter-matches-strings-only", testEventMetaFilter},
		{"Events/ids-not-reused-after-retention", testEventIDsNotReused},
		{"Events/text-not-utf8-refused", testEventNotUTF8},
	}
}

// testEventLog: a key deduplicates per (tenant, topic); the list filters by
// entity, types, a metadata value and time, oldest first, after a cursor;
// retention deletes by age; bad events are refused.
func testEventLog(t *testing.T, s store.Store) {
	ctx := context.Background()
	ev := func(key, typ, entity, meta string, d time.Duration) *store.Event {
		e := &store.Event{Tenant: "t", Topic: "orders", Key: key, Type: typ, PartitionKey: entity,
			Payload: json.RawMessage(`{"n":1}`), CreatedAt: at(d), Deliveries: 2}
		if meta != "" {
			e.Metadata = json.RawMessage(meta)
		}
		return e
	}
	var ids []int64
	for i, e := range []*store.Event{
		ev("k1", "created", "order-1", `{"region":"eu"}`, 0),
		ev("k2", "paid", "order-1", `{"region":"us"}`, time.Minute),
		ev("", "created", "order-2", "", 2*time.Minute),
		ev("k4", "shipped", "order-1", `{"region":"eu"}`, 3*time.Minute),
	} {
		got, existing, err := s.EventInsert(ctx, e)
		wantOK(t, "insert", err)
		if existing || got.ID == 0 || !got.CreatedAt.Equal(e.CreatedAt) || string(got.Payload) != `{"n":1}` || got.Deliveries != 2 {
			t.Fatalf("insert %d: %+v existing=%v", i, got, existing)
		}
		ids = append(ids, got.ID)
	}
	again, existing, err := s.EventInsert(ctx, ev("k1", "other", "x", "", time.Hour))
	wantOK(t, "repeat key", err)
	if !existing || again.ID != ids[0] || again.Type != "created" || string(again.Metadata) != `{"region":"eu"}` {
		t.Fatalf("repeat key: %+v existing=%v, want event %d", again, existing, ids[0])
	}
	other := ev("k1", "created", "order-1", "", 0)
	other.Topic = "payments"
	if _, existing, err := s.EventInsert(ctx, other); err != nil || existing {
		t.Fatalf("same key, other topic: existing=%v err=%v", existing, err)
	}
	list := func(p store.EventListParams) []int64 {
		t.Helper()
		p.Tenant, p.Topic = "t", "orders"
		got, err := s.EventList(ctx, &p)
		wantOK(t, "list", err)
		var out []int64
		for _, e := range got {
			out = append(out, e.ID)
		}
		return out
	}
	wantIDs(t, "all", list(store.EventListParams{}), ids)
	wantIDs(t, "entity", list(store.EventListParams{PartitionKey: "order-1"}), []int64{ids[0], ids[1], ids[3]})
	wantIDs(t, "types", list(store.EventListParams{Types: []string{"created", "shipped"}}), []int64{ids[0], ids[2], ids[3]})
	wantIDs(t, "metadata", list(store.EventListParams{MetaKey: "region", MetaValue: "eu"}), []int64{ids[0], ids[3]})
	wantIDs(t, "time range", list(store.EventListParams{From: at(time.Minute), To: at(3 * time.Minute)}), []int64{ids[1], ids[2]})
	wantIDs(t, "after, limit", list(store.EventListParams{AfterID: ids[0], Limit: 2}), []int64{ids[1], ids[2]})

	n, err := s.EventDeleteBefore(ctx, &store.EventDeleteBeforeParams{Before: at(2 * time.Minute)})
	wantOK(t, "delete", err)
	if n != 3 { // two of orders, one of payments
		t.Fatalf("deleted %d events, want 3", n)
	}
	wantIDs(t, "after retention", list(store.EventListParams{}), []int64{ids[2], ids[3]})

	for _, bad := range []*store.Event{
		{Tenant: "t", Payload: json.RawMessage(`{}`)},
		{Tenant: "t", Topic: "o", Payload: json.RawMessage(`{`)},
		{Tenant: "t", Topic: "o", Payload: json.RawMessage(`{}`), Metadata: json.RawMessage(`[1]`)},
		// NUL, which PostgreSQL's text cannot hold: a metadata filter over
		// the topic would fail.
		{Tenant: "t", Topic: "o", Payload: json.RawMessage(`{}`), Metadata: json.RawMessage(`{"region":"eu\u0000"}`)},
		{Tenant: "t", Topic: "o", Payload: json.RawMessage(`{"s":"\u0000"}`)},
	} {
		_, _, err := s.EventInsert(ctx, bad)
		wantErr(t, "bad event", err, idemtype.ErrInvalid)
	}
}

// testEventMetaFilter: a metadata filter matches the metadata's top-level
// key holding the string value only, not a number, boolean, object or
// array of the same text; an escaped backslash before "u0000" is no NUL.
func testEventMetaFilter(t *testing.T, s store.Store) {
	ctx := context.Background()
	var ids []int64
	for _, meta := range []string{
		`{"shard":5,"flag":true,"obj":{},"arr":[]}`,
		`{"shard":"5","flag":"true","obj":"{}","arr":"[]"}`,
		`{"path":"\\u0000","shard":"x"}`,
	} {
		e, _, err := s.EventInsert(ctx, &store.Event{Tenant: "t", Topic: "meta", Payload: json.RawMessage(`{}`),
			Metadata: json.RawMessage(meta), CreatedAt: at(0)})
		wantOK(t, "insert "+meta, err)
		ids = append(ids, e.ID)
	}
	for _, tc := range []struct {
		key, value string
		want       []int64
	}{
		{"shard", "5", []int64{ids[1]}},
		{"flag", "true", []int64{ids[1]}},
		{"obj", "{}", []int64{ids[1]}},
		{"arr", "[]", []int64{ids[1]}},
		{"path", `\u0000`, []int64{ids[2]}},
		{"missing", "", nil},
	} {
		got, err := s.EventList(ctx, &store.EventListParams{Tenant: "t", Topic: "meta", MetaKey: tc.key, MetaValue: tc.value})
		wantOK(t, "list "+tc.key, err)
		var out []int64
		for _, e := range got {
			out = append(out, e.ID)
		}
		wantIDs(t, tc.key+"="+tc.value, out, tc.want)
	}
}

// testEventIDsNotReused: retention deleting the newest events does not give
// their ids again; the delivery jobs of an event are keyed by its id
// ("event-<id>/<subscription>") and may outlive it.
func testEventIDsNotReused(t *testing.T, s store.Store) {
	ctx := context.Background()
	var last int64
	for range 2 {
		e, _, err := s.EventInsert(ctx, &store.Event{Tenant: "t", Topic: "orders", Payload: json.RawMessage(`{}`), CreatedAt: at(0)})
		wantOK(t, "insert", err)
		last = e.ID
	}
	n, err := s.EventDeleteBefore(ctx, &store.EventDeleteBeforeParams{Before: at(time.Hour)})
	wantOK(t, "delete", err)
	if n != 2 {
		t.Fatalf("deleted %d events, want 2", n)
	}
	for i := range 2 {
		e, _, err := s.EventInsert(ctx, &store.Event{Tenant: "t", Topic: "orders", Payload: json.RawMessage(`{}`), CreatedAt: at(time.Hour)})
		wantOK(t, "insert after retention", err)
		if e.ID <= last {
			t.Fatalf("event %d after retention got the id %d, not above the deleted %d", i, e.ID, last)
		}
		last = e.ID
	}
}

// testEventNotUTF8: an event whose payload, metadata or text fields hold
// bytes that are not UTF-8, or a NUL byte in a text field, is refused with
// ErrInvalid and not stored, on both stores (PostgreSQL's text and json
// cannot hold them; SQLite stored them, PostgreSQL failed with an error of
// its own).
func testEventNotUTF8(t *testing.T, s store.Store) {
	ctx := context.Background()
	ev := func(f func(e *store.Event)) *store.Event {
		e := &store.Event{Tenant: "t", Topic: "utf8", Payload: json.RawMessage(`{}`), CreatedAt: at(0)}
		f(e)
		return e
	}
	for name, e := range map[string]*store.Event{
		"payload":          ev(func(e *store.Event) { e.Payload = json.RawMessage("\"caf\xe9\"") }),
		"metadata":         ev(func(e *store.Event) { e.Metadata = json.RawMessage("{\"r\":\"caf\xe9\"}") }),
		"key":              ev(func(e *store.Event) { e.Key = "k\xff" }),
		"type":             ev(func(e *store.Event) { e.Type = "t\xff" }),
		"partition key":    ev(func(e *store.Event) { e.PartitionKey = "p\xff" }),
		"key with NUL":     ev(func(e *store.Event) { e.Key = "k\x00" }),
		"type with NUL":    ev(func(e *store.Event) { e.Type = "t\x00" }),
		"partition w/ NUL": ev(func(e *store.Event) { e.PartitionKey = "p\x00" }),
	} {
		if _, _, err := s.EventInsert(ctx, e); !errors.Is(err, idemtype.ErrInvalid) {
			t.Errorf("event with %s not UTF-8 (or NUL): %v, want ErrInvalid", name, err)
		}
	}
	got, err := s.EventList(ctx, &store.EventListParams{Tenant: "t", Topic: "utf8"})
	wantOK(t, "list", err)
	if len(got) != 0 {
		t.Fatalf("%d refused events were stored", len(got))
	}
}
