package cli

import (
	"encoding/json"
	"hash/fnv"
	"slices"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/internal/dbtest"
)

// TestMigrateUpFromSeveralHostsSaysWhoApplied: `idem migrate` run from
// several hosts at once (docs/operations.md, "Upgrades") reports the
// versions each run applied itself: between them every version is
// reported once, and the runs that found the work done report none. The
// version a run started from used to be read before the migration lock,
// so every run that queued on the lock reported the whole upgrade as its
// own. Not parallel: the schema name travels in IDEM_PG_SCHEMA.
func TestMigrateUpFromSeveralHostsSaysWhoApplied(t *testing.T) {
	url, schema := dbtest.NewSchema(t)
	t.Setenv(envSchema, schema)
	ctx := t.Context()
	// Hold the schema's migration lock (pgstore's lockKey: FNV-64a of
	// "idem-migrate:" + schema) so that both runs start before either
	// migrates.
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	h := fnv.New64a()
	h.Write([]byte("idem-migrate:" + schema))
	key := int64(h.Sum64())
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		t.Fatal(err)
	}
	const runs = 2
	results := make([]migrateResult, runs)
	var wg sync.WaitGroup
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, errs, code := run(t, "migrate", "--json", "--database", url)
			if code != 0 || json.Unmarshal([]byte(out), &results[i]) != nil {
				t.Errorf("migrate %d: %d %q %q", i, code, out, errs)
			}
		}()
	}
	dbtest.UntilLocks(t, conn, true, nil, "the runs do not both wait for the migration lock",
		`SELECT count(*) = $2 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
  AND ((classid::bigint << 32) | objid::bigint) = $1`, key, runs)
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, key); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	var all []int
	for _, r := range results {
		all = append(all, r.Applied...)
	}
	slices.Sort(all)
	// Versions may skip numbers: each reported once, the first 1, the last To.
	if len(all) == 0 || all[0] != 1 || all[len(all)-1] != results[0].To || len(slices.Compact(slices.Clone(all))) != len(all) {
		t.Fatalf("the runs reported %+v: want every version reported by one run only", results)
	}
	if (len(results[0].Applied) == 0) == (len(results[1].Applied) == 0) {
		t.Fatalf("the runs reported %+v: want one run to apply everything, the other nothing", results)
	}
}
