package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/idem-dev/idem"
)

// TestHandlerErrorCut (both stores): a Go handler's error text over
// idem.MaxErrorBytes is stored cut to that limit, on a UTF-8 boundary and
// ending with a marker that says so, in the job's last error and in its
// attempt. It was stored whole: a handler returning a 10 MB error put
// 10 MB in last_error and in the attempt, and every later reply carrying
// the job outgrew the Idempotency-Key middleware's stored-reply caps
// (which count a last error of at most MaxErrorBytes).
func TestHandlerErrorCut(t *testing.T) {
	t.Parallel()
	// 10 MB of three-byte runes after one byte: no cut at MaxErrorBytes
	// minus a marker falls on a rune boundary by chance.
	huge := "x" + strings.Repeat("€", 10<<20/3)
	for _, sk := range storeKinds() {
		t.Run(sk.name, func(t *testing.T) {
			t.Parallel()
			st, _ := sk.open(t)
			w := idem.NewWorkers()
			w.Handle("huge", idem.HandlerFunc(func(context.Context, *idem.JobRow) (json.RawMessage, error) {
				return nil, errors.New(huge)
			}))
			b := &bundle{workers: w}
			var err error
			b.client, err = idem.NewClient(st, &idem.Config{Workers: w, Queues: queues(1),
				Logger: quietLogger(), DisableMaintenance: true})
			if err != nil {
				t.Fatal(err)
			}
			b.start(t)
			r, err := b.client.EnqueueRaw(t.Context(), idem.EnqueueParams{Kind: "huge", Opts: &idem.EnqueueOpts{MaxAttempts: 1}})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
			row, err := b.client.JobWait(ctx, r.Job.ID)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			atts, err := b.client.JobAttempts(t.Context(), r.Job.Tenant, r.Job.ID)
			if err != nil || len(atts) != 1 {
				t.Fatalf("attempts %v, %v", atts, err)
			}
			for name, got := range map[string]string{"last error": row.LastError, "attempt error": atts[0].Error} {
				if len(got) > idem.MaxErrorBytes || !utf8.ValidString(got) {
					t.Fatalf("%s: %d bytes (valid UTF-8: %v), want at most %d", name, len(got), utf8.ValidString(got), idem.MaxErrorBytes)
				}
				body, ok := strings.CutSuffix(got, fmt.Sprintf(" …[cut: %d bytes in all]", len(huge)))
				if !ok || !strings.HasPrefix(huge, body) || len(body) < idem.MaxErrorBytes-100 {
					t.Fatalf("%s: %d bytes ending %q: want the error's first bytes and the cut marker", name, len(got), got[max(0, len(got)-60):])
				}
			}
		})
	}
}
