package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemtype"
)

// TestRecordOfKeyAfterDLQDelete (both stores): a keyed job run by a Go
// worker dies (a permanent error; its one attempt failing) and is deleted
// from the dead-letter queue inside its key's window: the record reads
// failed naming the deleted job, not in_progress.
func TestRecordOfKeyAfterDLQDelete(t *testing.T) {
	t.Parallel()
	bothBundles(t, func() *idem.Config { return &idem.Config{Queues: queues(1)} }, func(t *testing.T, b *bundle) {
		ctx := context.Background()
		b.workers.Handle("perm", func(context.Context, *idem.JobRow) (json.RawMessage, error) {
			return nil, idem.JobPermanent(errors.New("dies"))
		})
		b.workers.Handle("fails", func(context.Context, *idem.JobRow) (json.RawMessage, error) {
			return nil, errors.New("fails")
		})
		hour := time.Hour
		b.start(t)
		for _, kind := range []string{"perm", "fails"} {
			key := "dlq-" + kind
			r, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: kind, Opts: &idem.EnqueueOpts{IdempotencyKey: key,
				MaxAttempts: 1, DedupWindow: &hour}})
			if err != nil {
				t.Fatal(err)
			}
			waitState(t, b, r.Job.ID, idem.StateDead)
			if rec, err := b.client.RecordGet(ctx, "", key); err != nil || rec.Status != idemtype.RecordFailed {
				t.Fatalf("%s: record of the dead job: %+v %v", kind, rec, err)
			}
			if err := b.client.DLQDelete(ctx, "", r.Job.ID); err != nil {
				t.Fatal(err)
			}
			rec, err := b.client.RecordGet(ctx, "", key)
			if err != nil || rec.Status != idemtype.RecordFailed || rec.JobID != r.Job.ID {
				t.Fatalf("%s: record after the DLQ delete: %+v %v; want failed naming job %d", kind, rec, err, r.Job.ID)
			}
		}
	})
}
