package sqlitestore

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// TestMigrateUpReportsOnlyItsOwnVersions: two Stores migrating one new
// file at once (two `idem migrate` processes) report between them every
// version once: the one that applied them from 0, the other none, from
// the newest (what each read in its own write transaction).
func TestMigrateUpReportsOnlyItsOwnVersions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "idem.db")
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	newest := ms[len(ms)-1].version
	type report struct {
		from    int
		applied []int
	}
	reports := make([]report, 2)
	var wg sync.WaitGroup
	for i := range reports {
		s, err := Open(ctx, path, &Config{SkipMigrate: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			from, applied, err := s.MigrateUp(ctx)
			if err != nil {
				t.Errorf("MigrateUp %d: %v", i, err)
			}
			reports[i] = report{from, applied}
		}()
	}
	wg.Wait()
	slices.SortFunc(reports, func(a, b report) int { return len(b.applied) - len(a.applied) })
	if r := reports[0]; r.from != 0 || len(r.applied) != len(ms) || r.applied[len(r.applied)-1] != newest {
		t.Errorf("the migrating Store reported from %d, applied %v: want from 0, every version", r.from, r.applied)
	}
	if r := reports[1]; r.from != newest || len(r.applied) != 0 {
		t.Errorf("the waiting Store reported from %d, applied %v: want from %d, none", r.from, r.applied, newest)
	}
}
