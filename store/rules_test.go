package store_test

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

func TestListAndBatchLimits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, list, batch int }{
		{-1, store.MaxListLimit, store.MaxBatch},
		{0, store.MaxListLimit, store.MaxBatch},
		{1, 1, 1},
		{store.MaxListLimit, store.MaxListLimit, store.MaxListLimit},
		{store.MaxListLimit + 1, store.MaxListLimit, store.MaxListLimit + 1},
		{5000, store.MaxListLimit, 5000},
	} {
		if got := store.ListLimit(tc.in); got != tc.list {
			t.Errorf("ListLimit(%d) = %d, want %d", tc.in, got, tc.list)
		}
		if got := store.BatchLimit(tc.in); got != tc.batch {
			t.Errorf("BatchLimit(%d) = %d, want %d", tc.in, got, tc.batch)
		}
	}
	if store.MaxListLimit != 500 || store.MaxBatch != 1000 {
		t.Errorf("the API promises 500 and 1,000: %d %d", store.MaxListLimit, store.MaxBatch)
	}
}

func TestErrClosedWrapsTheSentinel(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("claim jobs: %w", store.ErrClosed)
	if !errors.Is(err, idemtype.ErrClosed) || !errors.Is(err, store.ErrClosed) {
		t.Errorf("%v does not unwrap to idemtype.ErrClosed", err)
	}
}

func TestSameResult(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"", "", true},
		{`{"a":1}`, "", false},
		{"", `null`, false},
		{`{"a":1,"b":[1,2]}`, `{"a":1,"b":[1,2]}`, true},
		{`{"a":1,"b":2}`, `{"b":2,"a":1}`, true},             // key order
		{`{"a":1}`, " {\n  \"a\" : 1\n}\t", true},            // whitespace
		{`{"a":{"x":1,"y":2}}`, `{"a":{"y":2,"x":1}}`, true}, // nested key order
		{`{"a":1}`, `{"a":1.0}`, true},                       // the same number
		{`{"a":1}`, `{"a":2}`, false},
		{`{"a":1}`, `{"a":"1"}`, false},
		{`[1,2]`, `[2,1]`, false}, // array order matters
		{`{"a":null}`, `{}`, false},
		{`"x"`, `"x" `, true},
		{`not json`, `not json`, true}, // identical bytes
		{`not json`, `not  json`, false},
		{`{"a":1}`, `{"a":1`, false}, // one side broken
		{`null`, `null`, true},
		{`{"a":"\u00e9"}`, `{"a":"é"}`, true}, // the same string, escaped
	} {
		if got := store.SameResult([]byte(tc.a), []byte(tc.b)); got != tc.want {
			t.Errorf("SameResult(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
		if got := store.SameResult([]byte(tc.b), []byte(tc.a)); got != tc.want {
			t.Errorf("SameResult(%q, %q) = %v, want %v (not symmetric)", tc.b, tc.a, got, tc.want)
		}
	}
	if !store.SameResult(nil, []byte{}) {
		t.Error("nil and empty are both no result")
	}
}

func TestTargetCheck(t *testing.T) {
	t.Parallel()
	ok := store.DeliveryTarget{Tenant: "acme", Name: "hook", URL: "https://example.com/h", Queue: "mail"}
	for _, tc := range []struct {
		name  string
		edit  func(*store.DeliveryTarget)
		field string
	}{
		{"valid", func(*store.DeliveryTarget) {}, ""},
		{"a kind instead of a queue", func(d *store.DeliveryTarget) { d.Queue, d.Kind = "", "send" }, ""},
		{"no tenant", func(d *store.DeliveryTarget) { d.Tenant = "" }, "tenant"},
		{"no name", func(d *store.DeliveryTarget) { d.Name = "" }, "name"},
		{"no url", func(d *store.DeliveryTarget) { d.URL = "" }, "url"},
		{"neither queue nor kind", func(d *store.DeliveryTarget) { d.Queue = "" }, "queue"},
		{"negative timeout", func(d *store.DeliveryTarget) { d.Timeout = -time.Second }, "timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := ok
			tc.edit(&d)
			_, _, err := store.TargetCheck(&d)
			if got := invalidField(t, err); got != tc.field {
				t.Errorf("field %q, want %q", got, tc.field)
			}
		})
	}
}

func TestTargetCheckEncodesLists(t *testing.T) {
	t.Parallel()
	d := store.DeliveryTarget{Tenant: "acme", Name: "hook", URL: "https://example.com", Kind: "k"}
	secrets, types, err := store.TargetCheck(&d)
	if err != nil || secrets != "[]" || types != "[]" {
		t.Errorf("empty lists: %q %q %v (want [] and [], never null)", secrets, types, err)
	}
	d.Secrets = []string{"whsec_a", `whsec_"b"`}
	d.EventTypes = []string{"order.paid"}
	secrets, types, err = store.TargetCheck(&d)
	if err != nil || secrets != `["whsec_a","whsec_\"b\""]` || types != `["order.paid"]` {
		t.Errorf("lists: %q %q %v", secrets, types, err)
	}
}

func TestEventCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		ev    store.Event
		field string
	}{
		{"valid", store.Event{Tenant: "t", Topic: "orders", Payload: []byte(`{"id":1}`)}, ""},
		{"scalar payload", store.Event{Tenant: "t", Topic: "orders", Payload: []byte(`42`)}, ""},
		{"metadata object", store.Event{Tenant: "t", Topic: "orders", Payload: []byte(`{}`), Metadata: []byte(` {"src":"x"}`)}, ""},
		{"no tenant", store.Event{Topic: "orders", Payload: []byte(`{}`)}, "tenant"},
		{"no topic", store.Event{Tenant: "t", Payload: []byte(`{}`)}, "topic"},
		{"no payload", store.Event{Tenant: "t", Topic: "orders"}, "payload"},
		{"broken payload", store.Event{Tenant: "t", Topic: "orders", Payload: []byte(`{"a":`)}, "payload"},
		{"metadata array", store.Event{Tenant: "t", Topic: "orders", Payload: []byte(`{}`), Metadata: []byte(`[1]`)}, "metadata"},
		{"metadata string", store.Event{Tenant: "t", Topic: "orders", Payload: []byte(`{}`), Metadata: []byte(`"x"`)}, "metadata"},
		{"metadata broken", store.Event{Tenant: "t", Topic: "orders", Payload: []byte(`{}`), Metadata: []byte(`{`)}, "metadata"},
		{"metadata blank", store.Event{Tenant: "t", Topic: "orders", Payload: []byte(`{}`), Metadata: []byte(`   `)}, "metadata"},
		{"metadata NUL", store.Event{Tenant: "t", Topic: "orders", Payload: []byte(`{}`), Metadata: []byte(`{"region":"eu\u0000"}`)}, "metadata"},
		{"metadata NUL key", store.Event{Tenant: "t", Topic: "orders", Payload: []byte(`{}`), Metadata: []byte(`{"a\u0000":"x"}`)}, "metadata"},
		{"payload NUL", store.Event{Tenant: "t", Topic: "orders", Payload: []byte(`["\t\u0000"]`)}, "payload"},
		{"escaped backslash before u0000", store.Event{Tenant: "t", Topic: "orders", Payload: []byte(`"\\u0000"`),
			Metadata: []byte(`{"path":"C:\\u0000\\\\u0000"}`)}, ""},
		{"other escapes", store.Event{Tenant: "t", Topic: "orders", Payload: []byte(`"\u0001\u00e9\\"`)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := invalidField(t, store.EventCheck(&tc.ev)); got != tc.field {
				t.Errorf("field %q, want %q", got, tc.field)
			}
		})
	}
}

// classifier is a store that calls every error it is given a storage
// failure when down is true.
type classifier struct{ down bool }

func (c classifier) IsUnavailable(error) bool { return c.down }

func TestClassify(t *testing.T) {
	t.Parallel()
	cause := &fs.PathError{Op: "write", Path: "/data/idem.db", Err: errors.New("no space left on device")}
	wrapped := fmt.Errorf("finish jobs: %w", cause)

	if store.Classify(classifier{down: true}, nil) != nil {
		t.Error("nil is classified as an error")
	}
	// A storage failure: ErrUnavailable, with the cause still reachable.
	err := store.Classify(classifier{down: true}, wrapped)
	var pe *fs.PathError
	if !errors.Is(err, idemtype.ErrUnavailable) || !errors.Is(err, cause) || !errors.As(err, &pe) || pe.Path != "/data/idem.db" {
		t.Errorf("classified failure %v loses ErrUnavailable or its cause", err)
	}
	if err.Error() != wrapped.Error() {
		t.Errorf("message changed: %q, want %q", err, wrapped)
	}
	// Classifying twice does not wrap twice.
	if again := store.Classify(classifier{down: true}, err); again != err {
		t.Errorf("classified twice: %v", again)
	}
	// A refused request stays as it is.
	if got := store.Classify(classifier{down: false}, wrapped); got != wrapped {
		t.Errorf("refusal changed: %v", got)
	}
	// A store that cannot tell leaves errors alone.
	if got := store.Classify(struct{}{}, wrapped); got != wrapped || errors.Is(got, idemtype.ErrUnavailable) {
		t.Errorf("unclassified error changed: %v", got)
	}
	// A closed store is closed, not unavailable.
	closed := fmt.Errorf("claim: %w", store.ErrClosed)
	if got := store.Classify(classifier{down: true}, closed); got != closed || errors.Is(got, idemtype.ErrUnavailable) {
		t.Errorf("closed error classified: %v", got)
	}
}

func TestJobOwner(t *testing.T) {
	t.Parallel()
	if got := store.JobOwner(42); got != "job:42" {
		t.Errorf("JobOwner(42) = %q", got)
	}
	if store.JobOwner(1) == store.JobOwner(11) {
		t.Error("distinct jobs share an owner")
	}
}

func TestNewToken(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 100 {
		tok := store.NewToken()
		if b, err := hex.DecodeString(tok); err != nil || len(b) != 16 {
			t.Fatalf("token %q is not 128 bits of hex", tok)
		}
		if seen[tok] {
			t.Fatalf("token %q repeated", tok)
		}
		seen[tok] = true
	}
}

func TestOrNow(t *testing.T) {
	t.Parallel()
	before := time.Now()
	got := store.OrNow(time.Time{})
	if got.Location() != time.UTC || got.Before(before.Truncate(time.Microsecond)) || got.After(time.Now()) {
		t.Errorf("OrNow(zero) = %v, want now in UTC", got)
	}
	paris := time.FixedZone("CET", 3600)
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, paris)
	got = store.OrNow(at)
	if !got.Equal(at) || got.Location() != time.UTC {
		t.Errorf("OrNow(%v) = %v, want the same instant in UTC", at, got)
	}
}
