package idem_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// TestObserverSeesDo: Do reports its cache miss and then its hit.
func TestObserverSeesDo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "idem.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	obs := &countingObserver{counts: map[idem.EventType]int{}}
	client, err := idem.NewClient(st, &idem.Config{DisableMaintenance: true, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := client.Do(ctx, "report-1", func(context.Context) (any, error) { return 1, nil }, nil); err != nil {
			t.Fatal(err)
		}
	}
	if obs.counts[idem.EventCacheMiss] != 1 || obs.counts[idem.EventCacheHit] != 1 {
		t.Fatalf("events %v", obs.counts)
	}
}
