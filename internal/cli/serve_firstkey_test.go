package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/pgstore"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// TestFirstStartMintsOneAdminKey: two nodes starting together on an empty
// database both find no key; exactly one creates and prints an admin key,
// the other prints none (on each store). The second node's whole start-up
// runs while the first is between its look and its create — the window in
// which both used to mint and print a key.
func TestFirstStartMintsOneAdminKey(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]func(t *testing.T) (a, b store.Store){
		"sqlite": func(t *testing.T) (store.Store, store.Store) {
			path := filepath.Join(t.TempDir(), "idem.db")
			a, err := sqlitestore.Open(t.Context(), path, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { a.Close() })
			b, err := sqlitestore.Open(t.Context(), path, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			return a, b
		},
		"postgres": func(t *testing.T) (store.Store, store.Store) {
			url, schema := dbtest.NewSchema(t)
			var out [2]store.Store
			for i := range out {
				s, err := pgstore.Open(t.Context(), url, &pgstore.Config{Schema: schema})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				out[i] = s
			}
			return out[0], out[1]
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			a, b := open(t)
			ctx := context.Background()
			var outA, outB bytes.Buffer
			var errB error
			errA := mintFirstAdminKey(ctx, a, &outA, false, func() {
				errB = ensureAdminKey(ctx, b, &outB, false)
			})
			if errA != nil || errB != nil {
				t.Fatalf("first start: %v, %v", errA, errB)
			}
			keys, err := a.APIKeyList(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(keys) != 1 || !keys[0].Admin {
				t.Fatalf("%d keys after two first starts, want one admin key: %+v", len(keys), keys)
			}
			printed := strings.Count(outA.String()+outB.String(), "IDEM_API_KEY=")
			if printed != 1 {
				t.Fatalf("%d admin keys printed, want 1:\nA: %s\nB: %s", printed, outA.String(), outB.String())
			}
			// A later start finds the key and prints nothing.
			var later bytes.Buffer
			if err := ensureAdminKey(ctx, a, &later, false); err != nil || later.Len() != 0 {
				t.Fatalf("later start: %v %q", err, later.String())
			}
		})
	}
}
