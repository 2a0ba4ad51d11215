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

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemclient"
)

// TestRequestJSONRule: every method that sends a JSON document the server
// checks with its JSON rule (idem.ValidateJSON: a pull worker's result, an
// enqueue's args and metadata, a batch's jobs and completion job, a
// schedule's args) refuses before sending, with an error naming the
// field that is errors.Is ErrInvalid, what the server would refuse: a
// number beyond the double range, nesting over MaxJSONDepth, over
// MaxArgsBytes, a repeated member name. Complete and the others checked
// nothing and sent them. Valid documents are sent.
func TestRequestJSONRule(t *testing.T) {
	t.Parallel()
	c, sent := countingClient(t, `{}`)
	ctx := context.Background()
	bad := refusedDocuments()
	calls := map[string]func(doc json.RawMessage) error{
		"result": func(doc json.RawMessage) error {
			_, err := c.Complete(ctx, "1", "tok", doc)
			return err
		},
		"args": func(doc json.RawMessage) error {
			_, err := c.Enqueue(ctx, &idemclient.EnqueueRequest{Kind: "k", Args: doc})
			return err
		},
		"metadata": func(doc json.RawMessage) error {
			_, err := c.Enqueue(ctx, &idemclient.EnqueueRequest{Kind: "k", Metadata: doc})
			return err
		},
		"jobs[1].args": func(doc json.RawMessage) error {
			_, err := c.BatchCreate(ctx, "b", nil, []*idemclient.EnqueueRequest{{Kind: "k"}, {Kind: "k", Args: doc}})
			return err
		},
		"jobs[0].metadata": func(doc json.RawMessage) error {
			_, err := c.BatchCreate(ctx, "b", nil, []*idemclient.EnqueueRequest{{Kind: "k", Metadata: doc}})
			return err
		},
		"on_finish.args": func(doc json.RawMessage) error {
			_, err := c.BatchCreateWith(ctx, &idemclient.BatchCreateRequest{Key: "b",
				Jobs: []*idemclient.EnqueueRequest{{Kind: "k"}}, OnFinish: &idemclient.EnqueueRequest{Kind: "k", Args: doc}})
			return err
		},
		"schedule args": func(doc json.RawMessage) error {
			_, err := c.PutSchedule(ctx, "s", &idemclient.ScheduleRequest{Cron: "* * * * *", Kind: "k", Args: doc})
			return err
		},
	}
	for field, call := range calls {
		want := strings.TrimPrefix(field, "schedule ")
		for name, doc := range bad {
			err := call(json.RawMessage(doc))
			var inv *idem.InvalidError
			if !errors.Is(err, idem.ErrInvalid) || !errors.As(err, &inv) || inv.Field != want {
				t.Errorf("%s %s: %v, want ErrInvalid naming %s", field, name, err, want)
			}
		}
	}
	if n := sent.Load(); n != 0 {
		t.Fatalf("%d refused documents were sent", n)
	}
	for field, call := range calls {
		for _, doc := range []json.RawMessage{json.RawMessage(`{"ok":1}`), nil} {
			if err := call(doc); err != nil {
				t.Errorf("%s %s: %v", field, doc, err)
			}
		}
	}
	if n, want := sent.Load(), int32(2*len(calls)); n != want {
		t.Fatalf("%d documents sent, want %d", n, want)
	}
}

// countingClient is a client of a server that answers every request with
// reply and counts them.
func countingClient(t *testing.T, reply string) (*idemclient.Client, *atomic.Int32) {
	t.Helper()
	sent := new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(reply))
	}))
	t.Cleanup(srv.Close)
	c, err := idemclient.New(srv.URL, &idemclient.Config{APIKey: "k", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	return c, sent
}

// refusedDocuments are JSON documents the server's rule (idem.ValidateJSON)
// refuses, by what is wrong with them.
func refusedDocuments() map[string]string {
	deep := strings.Repeat("[", idem.MaxJSONDepth+1) + strings.Repeat("]", idem.MaxJSONDepth+1)
	big := `"` + strings.Repeat("x", idem.MaxArgsBytes) + `"`
	return map[string]string{"1e400": `1e400`, "too deep": deep, "too big": big, "duplicate names": `{"a":1,"a":2}`}
}
