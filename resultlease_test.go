package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

// TestResultLeaseRenewAfterRelease: a renewal that arrives after its
// holder released the lease (a client's renew loop racing its own release)
// is ErrLeaseLost and leaves the key free for the next caller; it must not
// take the key back under the stale token.
func TestResultLeaseRenewAfterRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, nil)
	first, err := b.client.ResultLeaseAcquire(ctx, "renew:k", nil)
	if err != nil || first.Token == "" {
		t.Fatalf("acquire: %+v %v", first, err)
	}
	if _, err := b.client.ResultLeaseRenew(ctx, "", "renew:k", first.Token, 0); err != nil {
		t.Fatalf("renew of a held lease: %v", err)
	}
	if err := b.client.ResultLeaseRelease(ctx, "", "renew:k", first.Token); err != nil {
		t.Fatalf("release: %v", err)
	}
	until, err := b.client.ResultLeaseRenew(ctx, "", "renew:k", first.Token, 0)
	if !errors.Is(err, idem.ErrLeaseLost) {
		t.Errorf("renew after release: until %v, error %v; want ErrLeaseLost", until, err)
	}
	second, err := b.client.ResultLeaseAcquire(ctx, "renew:k", nil)
	if err != nil || second.Token == "" {
		t.Errorf("acquire after release and a late renew: %+v %v; want the lease", second, err)
	}
}

// TestDoLeaseValidated: a lease too short to renew, or a negative TTL or
// wait, is ErrInvalid before anything is stored (a 2 ns lease once made
// the renewer's ticker panic in its own goroutine).
func TestDoLeaseValidated(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ran := false
	fn := func(context.Context) (any, error) { ran = true; return 1, nil }
	for _, o := range []*idem.DoOpts{{Lease: 2 * time.Nanosecond}, {Lease: time.Millisecond}, {TTL: -time.Second}, {Wait: -time.Second}} {
		if _, err := b.client.Do(t.Context(), "do:tiny", fn, o); !errors.Is(err, idem.ErrInvalid) {
			t.Errorf("Do with %+v: %v, want ErrInvalid", o, err)
		}
	}
	if ran {
		t.Error("fn ran for an invalid Do")
	}
	if _, err := b.client.Do(t.Context(), "do:tiny", fn, &idem.DoOpts{Lease: 30 * time.Millisecond}); err != nil || !ran {
		t.Errorf("Do with a 30ms lease: ran %v, %v", ran, err)
	}
}

// TestResultLeaseCompleteResultRule: ResultLeaseComplete refuses, with
// ErrInvalid naming result, a result that a job's completion refuses (a
// number beyond the double range, nesting over MaxJSONDepth, over
// MaxArgsBytes): it checked only json.Valid, stored such a result and
// served it to every later caller of the key. The lease stays held, and
// a valid result completes it.
func TestResultLeaseCompleteResultRule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, nil)
	l, err := b.client.ResultLeaseAcquire(ctx, "rule:k", nil)
	if err != nil || l.Token == "" {
		t.Fatalf("acquire: %+v %v", l, err)
	}
	deep := strings.Repeat("[", idem.MaxJSONDepth+1) + strings.Repeat("]", idem.MaxJSONDepth+1)
	big := `"` + strings.Repeat("x", idem.MaxArgsBytes) + `"`
	for name, res := range map[string]string{"1e400": `1e400`, "too deep": deep, "too big": big, "duplicate names": `{"a":1,"a":2}`} {
		_, err := b.client.ResultLeaseComplete(ctx, "", "rule:k", l.Token, json.RawMessage(res), 0, 0)
		var inv *idem.InvalidError
		if !errors.Is(err, idem.ErrInvalid) || !errors.As(err, &inv) || inv.Field != "result" {
			t.Errorf("%s: %v, want ErrInvalid naming result", name, err)
		}
	}
	res, err := b.client.ResultLeaseComplete(ctx, "", "rule:k", l.Token, json.RawMessage(`{"ok":1}`), 0, 0)
	if err != nil || string(res.Result) != `{"ok":1}` {
		t.Fatalf("complete with a valid result after the refusals: %+v %v", res, err)
	}
}

// TestResultLeaseOptsValidated: a negative lease or TTL given to
// ResultLeaseAcquire is ErrInvalid, as for Do, and takes nothing. A
// negative lease failed with an unclassified error of the record lease,
// and a negative TTL took the lease with the default TTL.
func TestResultLeaseOptsValidated(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	for _, o := range []*idem.ResultLeaseOpts{{Lease: -time.Second}, {TTL: -time.Second}} {
		if _, err := b.client.ResultLeaseAcquire(t.Context(), "rl:neg", o); !errors.Is(err, idem.ErrInvalid) {
			t.Errorf("ResultLeaseAcquire with %+v: %v, want ErrInvalid", o, err)
		}
	}
	l, err := b.client.ResultLeaseAcquire(t.Context(), "rl:neg", nil)
	if err != nil || l.Token == "" {
		t.Fatalf("the key was taken by a refused acquire: %+v, %v", l, err)
	}
}
