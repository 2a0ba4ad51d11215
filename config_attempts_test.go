package idem_test

import (
	"context"
	"strings"
	"testing"

	"github.com/idem-dev/idem"
)

// TestConfigMaxAttemptsOverTheJobLimit: a default MaxAttempts above
// MaxMaxAttempts is refused by NewClient, naming it. It used to be
// accepted, and then every enqueue that left max_attempts to the default
// (every POST /v1/jobs without it, under `idem serve` with
// jobs.max_attempts = 5000) failed as invalid, naming a max_attempts the
// caller never sent.
func TestConfigMaxAttemptsOverTheJobLimit(t *testing.T) {
	t.Parallel()
	st := testStore(t)
	c, err := idem.NewClient(st, &idem.Config{MaxAttempts: idem.MaxMaxAttempts + 1, Logger: quietLogger()})
	if err == nil {
		_, eerr := c.Enqueue(context.Background(), SendArgs{To: "a@example.com"}, nil)
		t.Fatalf("NewClient accepted MaxAttempts %d (then Enqueue: %v)", idem.MaxMaxAttempts+1, eerr)
	}
	if !strings.Contains(err.Error(), "MaxAttempts") {
		t.Fatalf("err %v, want one naming MaxAttempts", err)
	}
	// The limit itself is a valid default.
	c, err = idem.NewClient(st, &idem.Config{MaxAttempts: idem.MaxMaxAttempts, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Enqueue(context.Background(), SendArgs{To: "a@example.com"}, nil)
	if err != nil || res.Job.MaxAttempts != idem.MaxMaxAttempts {
		t.Fatalf("enqueue: %+v, %v; want max_attempts %d", res, err, idem.MaxMaxAttempts)
	}
}
