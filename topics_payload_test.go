package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/idem-dev/idem"
)

// TestPublishRefusesUndeliverablePayload: an event whose payload or
// metadata its delivery jobs could not carry (the rule of every job's args:
// duplicate member names, numbers out of range, lone surrogates, bytes that
// are not UTF-8, nesting too deep, a delivery envelope over MaxArgsBytes)
// is refused whole, before it is stored: once stored, its publish failed
// at its fan-out with a 400 the caller could not fix by retrying (the key's
// repeat failed the same way), and the event stayed in the log, counted
// with deliveries never made, failing every replay that reached it. The
// same on both stores (PostgreSQL refused the bytes that are not UTF-8
// with an error of its own; SQLite stored them).
func TestPublishRefusesUndeliverablePayload(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]func(t *testing.T) *idem.Client{
		"sqlite":   func(t *testing.T) *idem.Client { return setup(t, nil).client },
		"postgres": func(t *testing.T) *idem.Client { b, _, _ := pgSetup(t, nil); return b.client },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			client := c(t)
			sub := &idem.Subscription{Topic: "orders", Name: "billing", URL: "http://127.0.0.1:1/hook"}
			if _, err := client.SubscriptionPut(ctx, sub); err != nil {
				t.Fatal(err)
			}
			deep := strings.Repeat("[", idem.MaxJSONDepth) + strings.Repeat("]", idem.MaxJSONDepth)
			cases := []struct {
				name, field       string
				payload, metadata string
			}{
				{"duplicate member", "payload", `{"a":1,"a":2}`, ""},
				{"number out of range", "payload", `{"a":1e400}`, ""},
				{"lone surrogate", "payload", `"\ud800"`, ""},
				{"not UTF-8", "payload", "\"caf\xe9\"", ""},
				{"metadata not UTF-8", "metadata", `{}`, "{\"region\":\"caf\xe9\"}"},
				{"metadata duplicate member", "metadata", `{}`, `{"a":"1","a":"2"}`},
				// 64 levels is a job's limit: inside the envelope it is 65.
				{"too deep in its envelope", "payload", deep, ""},
				// Under a job's 1 MiB, but not with the envelope around it.
				{"too large in its envelope", "payload", `"` + strings.Repeat("x", idem.MaxArgsBytes-10) + `"`, ""},
			}
			for i, tc := range cases {
				ev := &idem.Event{Topic: "orders", Key: "k" + string(rune('a'+i)), Payload: json.RawMessage(tc.payload)}
				if tc.metadata != "" {
					ev.Metadata = json.RawMessage(tc.metadata)
				}
				_, err := client.Publish(ctx, ev)
				var inv *idem.InvalidError
				if !errors.As(err, &inv) || inv.Field != tc.field {
					t.Errorf("%s: publish = %v, want invalid %s", tc.name, err, tc.field)
				}
			}
			evs, err := client.EventList(ctx, &idem.EventFilter{Topic: "orders"}, 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != 0 {
				t.Errorf("%d refused events were stored in the log (first: %d bytes of payload)", len(evs), len(evs[0].Payload))
			}
			// What a job carries is still accepted: 63 levels, and the
			// largest payload whose envelope fits.
			okDeep := strings.Repeat("[", idem.MaxJSONDepth-1) + strings.Repeat("]", idem.MaxJSONDepth-1)
			res, err := client.Publish(ctx, &idem.Event{Topic: "orders", Key: "deep", Payload: json.RawMessage(okDeep)})
			if err != nil || res.Deliveries != 1 {
				t.Fatalf("publish of a payload 63 levels deep: %+v %v", res, err)
			}
			if _, err := client.EventReplay(ctx, &idem.EventFilter{Topic: "orders"}, ""); err != nil {
				t.Fatalf("replay: %v", err)
			}
		})
	}
}
