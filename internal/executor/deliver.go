package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/deliver"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/webhook"
)

// BusyWait is how long a job snoozes when its target's concurrency cap is
// full.
const BusyWait = 250 * time.Millisecond

// MaxErrorExcerpt is how many bytes of a failed delivery's response the
// attempt's error keeps.
const MaxErrorExcerpt = 512

// ErrNoTarget is the error of an attempt whose job has neither a handler nor
// a matching delivery target; it retries, so a target added later takes it.
var ErrNoTarget = errors.New("no worker registered and no delivery target matches")

// deliver makes the attempt of a job without a handler by delivering it to
// its target, and maps the target's outcome through SetOutcome: completed
// with the response as result; retry with the job's backoff but no sooner
// than the target's Retry-After; dead. The attempt records the target's
// name and HTTP status.
func (e *Executor) deliver(ctx context.Context, row *idemtype.JobRow, fin *store.JobFinishParams) {
	tgt, name, err := e.cfg.Target(ctx, row)
	if err == nil && tgt == nil {
		err = fmt.Errorf("%w: queue %q, kind %q", ErrNoTarget, row.Queue, row.Kind)
	}
	if err != nil {
		e.SetOutcome(fin, row, nil, err)
		return
	}
	out := tgt.Deliver(ctx, &deliver.Delivery{
		JobID: row.ID, Kind: row.Kind, Args: row.Args, Attempt: row.Attempt,
		IdempotencyKey: row.IdempotencyKey, PartitionKey: row.PartitionKey, Tenant: row.Tenant,
	})
	if !errors.Is(out.Err, webhook.ErrTargetBusy) {
		fin.Target, fin.HTTPStatus = name, out.Status
	}
	switch {
	case errors.Is(out.Err, webhook.ErrTargetBusy):
		// The target's slots are full: a slow endpoint holds its own slots,
		// this worker goes back to other jobs; the attempt does not count.
		e.SetOutcome(fin, row, nil, &idemtype.ControlError{Kind: idemtype.ControlSnooze, After: BusyWait})
	case out.Class == deliver.Completed:
		e.SetOutcome(fin, row, deliveredResult(out), nil)
	case out.Class == deliver.Dead:
		e.SetOutcome(fin, row, nil, &idemtype.ControlError{Kind: idemtype.ControlPermanent, Err: deliveryError(out)})
	default:
		after := max(e.cfg.RetryDelay(row), out.RetryAfter)
		e.SetOutcome(fin, row, nil, &idemtype.ControlError{Kind: idemtype.ControlRetryAfter, After: after, Err: deliveryError(out)})
	}
}

// ResultJSON turns a target's answer into a job result: JSON as it is, other
// text as a JSON string, nothing as no result. Bytes that are not UTF-8 (a
// Latin-1 receiver) become U+FFFD first: encoding/json's Valid does not
// check UTF-8, and PostgreSQL refuses such a result, failing the finish of
// a delivery that succeeded.
func ResultJSON(body []byte) json.RawMessage {
	if len(body) == 0 {
		return nil
	}
	if !utf8.Valid(body) {
		body = bytes.ToValidUTF8(body, []byte("\uFFFD"))
	}
	if json.Valid(body) {
		return body
	}
	b, _ := json.Marshal(string(body)) // a string always encodes
	return b
}

// deliveredResult is the result of a completed delivery: ResultJSON of
// the target's answer, or, when the answer was cut at the target's limit
// (Outcome.Truncated), a JSON string of the text read, cut on a rune
// boundary, ending in " …[cut: more than N bytes]" (N the limit): a cut
// answer is never stored as if whole, nor parsed as JSON (a cut number
// would still parse, as another number).
func deliveredResult(out deliver.Outcome) json.RawMessage {
	if !out.Truncated {
		return ResultJSON(out.Result)
	}
	text := out.Result
	for i := len(text) - 1; i >= 0 && i >= len(text)-utf8.UTFMax; i-- {
		if utf8.RuneStart(text[i]) {
			if !utf8.FullRune(text[i:]) {
				text = text[:i] // a rune cut at the limit
			}
			break
		}
	}
	b, _ := json.Marshal(string(bytes.ToValidUTF8(text, []byte("\uFFFD"))) + fmt.Sprintf(" …[cut: more than %d bytes]", len(out.Result)))
	return b // a string always encodes
}

// deliveryError is the attempt's error: the target's, with an excerpt of
// the response when there was one.
func deliveryError(out deliver.Outcome) error {
	err := out.Err
	if err == nil {
		err = fmt.Errorf("delivery %s", out.Class)
	}
	if len(out.Result) == 0 {
		return err
	}
	return fmt.Errorf("%w; response: %q", err, excerpt(out.Result, MaxErrorExcerpt))
}

// excerpt returns at most n bytes of b, ending in "…" when cut: a UTF-8
// rune that the cut would split is left out whole. Bytes that are not
// UTF-8 (a Latin-1 answer) are kept as they are, for deliveryError quotes
// the excerpt (%q writes each as \xNN): backing off until the text is
// valid UTF-8 would cut such an answer back to just before its first
// non-ASCII byte.
func excerpt(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	cut := n
	for i := n - 1; i >= 0 && i > n-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			// A rune of b (not a byte that starts none) ending past n.
			if r, size := utf8.DecodeRune(b[i:]); (r != utf8.RuneError || size > 1) && i+size > n {
				cut = i
			}
			break
		}
	}
	return string(b[:cut]) + "…"
}
