package store_test

import (
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// sharedFrom is the first migration version that both stores number
// alike: before it, SQLite has a job_seq step (0002) and PostgreSQL an
// autovacuum step (0009) that the other has none of.
const sharedFrom = 10

// TestMigrationNumbersInStep: from version sharedFrom on, the SQLite and
// PostgreSQL stores have the same migrations, number for number and name
// for name (a step one store needs is a no-op kept in the other), so both
// stores of a release end at the same version, as docs/operations.md
// says.
func TestMigrationNumbersInStep(t *testing.T) {
	read := func(dir string) map[int]string {
		t.Helper()
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		ups := map[int]string{}
		for _, e := range entries {
			name, ok := strings.CutSuffix(e.Name(), ".up.sql")
			if !ok {
				continue
			}
			num, label, _ := strings.Cut(name, "_")
			v, err := strconv.Atoi(num)
			if err != nil {
				t.Fatalf("%s: %s: %v", dir, e.Name(), err)
			}
			if _, dup := ups[v]; dup {
				t.Fatalf("%s: version %d twice", dir, v)
			}
			ups[v] = label
		}
		return ups
	}
	pg, lite := read("pgstore/migrations"), read("sqlitestore/migrations")
	newest := func(m map[int]string) int { return slices.Max(slices.Collect(maps.Keys(m))) }
	if a, b := newest(pg), newest(lite); a != b {
		t.Fatalf("the newest version is %d on PostgreSQL, %d on SQLite", a, b)
	}
	for v := sharedFrom; v <= newest(pg); v++ {
		if pg[v] != lite[v] {
			t.Errorf("version %d: PostgreSQL %q, SQLite %q", v, pg[v], lite[v])
		}
	}
}
