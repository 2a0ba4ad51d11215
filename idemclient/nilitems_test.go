package idemclient_test

import (
	"context"
	"strings"
	"testing"

	"github.com/idem-dev/idem/idemclient"
)

// TestNilItemsNotSentAsNull: the nil inputs the table of
// TestNilRequestsAreInvalid leaves out (a nil list, a nil item of a list, a
// nil result or filter) never panic and are never sent as JSON null (which
// the server refuses as such, "not null", naming no field of the request).
func TestNilItemsNotSentAsNull(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	c := e.admin
	ctx := context.Background()
	runNilCalls(t, []nilCall{
		{"EnqueueBatch nil", func() error { _, err := c.EnqueueBatch(ctx, nil); return err }},
		{"EnqueueBatch nil item", func() error {
			res, err := c.EnqueueBatch(ctx, []*idemclient.EnqueueRequest{nil})
			if err == nil && len(res) == 1 && res[0].Error != nil {
				return res[0].Error // the item's own refusal
			}
			return err
		}},
		{"BatchCreate nil jobs", func() error { _, err := c.BatchCreate(ctx, "b1", nil, nil); return err }},
		{"BatchCreate nil job", func() error {
			_, err := c.BatchCreate(ctx, "b2", nil, []*idemclient.EnqueueRequest{nil})
			return err
		}},
		{"ClaimDetail nil", func() error { _, err := c.ClaimDetail(ctx, nil); return err }},
		{"DLQRequeue nil", func() error { _, err := c.DLQRequeue(ctx, nil, nil); return err }},
		{"Replay zero filter", func() error { _, err := c.Replay(ctx, idemclient.Filter{}, ""); return err }},
	}, func(t *testing.T, err error) {
		if err != nil && strings.Contains(err.Error(), "not null") {
			t.Fatalf("error %v; a nil input was sent as null", err)
		}
	})
}
