package idemclient_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemclient"
)

// TestNilRequestsAreInvalid: a nil request is sent as an empty one, which
// the server refuses naming the missing field (ErrInvalid), or refused
// before sending (a nil event); it never panics.
func TestNilRequestsAreInvalid(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	c := e.admin
	ctx := context.Background()
	runNilCalls(t, []nilCall{
		{"Enqueue", func() error { _, err := c.Enqueue(ctx, nil); return err }},
		{"BatchCreateWith", func() error { _, err := c.BatchCreateWith(ctx, nil); return err }},
		{"Claim", func() error { _, err := c.Claim(ctx, nil); return err }},
		{"ClaimWait", func() error { _, err := c.ClaimWait(ctx, nil); return err }},
		{"Publish", func() error { _, err := c.Publish(ctx, "topic", nil); return err }},
		{"PutSchedule", func() error { _, err := c.PutSchedule(ctx, "s", nil); return err }},
		{"PutTarget", func() error { _, _, err := c.PutTarget(ctx, "t", nil); return err }},
		{"PutSubscription", func() error { _, _, err := c.PutSubscription(ctx, "topic", "s", nil); return err }},
	}, func(t *testing.T, err error) {
		if !errors.Is(err, idem.ErrInvalid) {
			t.Fatalf("error %v; want a 400 (ErrInvalid)", err)
		}
		// Sent as an empty request, not as null (which the server
		// refuses as such, naming no field of the request).
		if strings.Contains(err.Error(), "not null") {
			t.Fatalf("error %v; want the empty request's, naming a missing field", err)
		}
	})
	// Fail's request is optional: nil fails the attempt without a message,
	// retried by the policy.
	e.enqueue(c, &idemclient.EnqueueRequest{Kind: "k", Queue: "nilfail"})
	j := e.claimOne(c, "nilfail")
	if got, err := c.Fail(ctx, j.ID, j.LeaseToken, nil); err != nil || got.State != "retryable" {
		t.Fatalf("Fail(nil): %+v %v; want the job retryable", got, err)
	}
}

// nilCall is a call of the client with a nil (or zero) input; name names
// its subtest.
type nilCall struct {
	name string
	call func() error
}

// runNilCalls runs each call in a subtest of its name, which fails if the
// call panics and otherwise checks the call's error with check.
func runNilCalls(t *testing.T, calls []nilCall, check func(t *testing.T, err error)) {
	t.Helper()
	for _, tc := range calls {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("panicked: %v", r)
					}
				}()
				err = tc.call()
			}()
			check(t, err)
		})
	}
}
