package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/idem-dev/idem"
)

// TestHandlerOutcomeAlwaysStored (both stores): whatever a Go handler
// returns, its attempt's outcome is written. An error whose text holds a
// NUL byte or invalid UTF-8 (bytes of a binary response, say) is stored
// with those bytes replaced by U+FFFD; an untyped handler's result that is
// not JSON fails the job permanently, as a typed worker's does. Before,
// PostgreSQL refused the whole finish batch (every job in it stayed
// running until the rescuer ran it again), and SQLite stored the invalid
// JSON as the job's result.
func TestHandlerOutcomeAlwaysStored(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		h       idem.HandlerFunc
		state   idem.JobState
		lastErr string
	}{
		{"an error with a NUL byte", func(context.Context, *idem.JobRow) (json.RawMessage, error) {
			return nil, idem.JobErrorCode("E\x00", errors.New("bad\x00byte"))
		}, idem.StateDead, "E\uFFFD: bad\uFFFDbyte"},
		{"an error with invalid UTF-8", func(context.Context, *idem.JobRow) (json.RawMessage, error) {
			return nil, errors.New("bad\xffbyte")
		}, idem.StateDead, "bad\uFFFDbyte"},
		{"a result that is not JSON", func(context.Context, *idem.JobRow) (json.RawMessage, error) {
			return json.RawMessage("not json"), nil
		}, idem.StateDead, "permanent failure: result is not valid JSON"},
	}
	for _, sk := range storeKinds() {
		t.Run(sk.name, func(t *testing.T) {
			t.Parallel()
			st, _ := sk.open(t)
			w := idem.NewWorkers()
			for i, c := range cases {
				w.Handle("k"+string(rune('a'+i)), c.h)
			}
			b := &bundle{workers: w}
			var err error
			b.client, err = idem.NewClient(st, &idem.Config{Workers: w, Queues: queues(len(cases)),
				Logger: quietLogger(), DisableMaintenance: true})
			if err != nil {
				t.Fatal(err)
			}
			b.start(t)
			for i, c := range cases {
				r, err := b.client.EnqueueRaw(t.Context(), idem.EnqueueParams{Kind: "k" + string(rune('a'+i)),
					Opts: &idem.EnqueueOpts{MaxAttempts: 1}})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
				row, err := b.client.JobWait(ctx, r.Job.ID)
				cancel()
				if err != nil {
					t.Fatalf("%s: the outcome was never written: %v", c.name, err)
				}
				if row.State != c.state || !strings.HasPrefix(row.LastError, c.lastErr) || row.Result != nil {
					t.Errorf("%s: %s, last error %q, result %q; want %s, %q", c.name, row.State, row.LastError, row.Result, c.state, c.lastErr)
				}
			}
		})
	}
}
