package idem_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

// TestNewClientRefusesNegativeResultTTL: a negative Config.ResultTTL (or a
// negative ResultTTLByKind entry) is refused by NewClient naming the field.
// It used to be accepted, and then every Enqueue of the client failed
// ("result_ttl > 0", for jobs without a key too) and every Do without its
// own TTL failed ("ttl must not be negative"), far from the setting.
func TestNewClientRefusesNegativeResultTTL(t *testing.T) {
	t.Parallel()
	st := testStore(t)
	for _, tc := range []struct {
		field string
		cfg   idem.Config
	}{
		{"ResultTTL", idem.Config{ResultTTL: -time.Hour}},
		{"ResultTTLByKind", idem.Config{ResultTTLByKind: map[string]time.Duration{"k": -time.Hour}}},
	} {
		t.Run(tc.field, func(t *testing.T) {
			c := tc.cfg
			c.Logger = quietLogger()
			client, err := idem.NewClient(st, &c)
			if err == nil {
				_, eerr := client.EnqueueRaw(context.Background(), idem.EnqueueParams{Kind: "k"})
				t.Fatalf("NewClient with a negative %s succeeded (an enqueue then fails: %v)", tc.field, eerr)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("NewClient with a negative %s: %v, want an error naming it", tc.field, err)
			}
		})
	}
	// 0 stays "the default" (a kind's 0 is no entry).
	c := idem.Config{Logger: quietLogger(), ResultTTLByKind: map[string]time.Duration{"k": 0}}
	client, err := idem.NewClient(st, &c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.EnqueueRaw(context.Background(), idem.EnqueueParams{Kind: "k"}); err != nil {
		t.Fatal(err)
	}
}
