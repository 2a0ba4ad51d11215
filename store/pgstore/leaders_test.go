package pgstore

import (
	"errors"
	"slices"
	"testing"

	"github.com/idem-dev/idem/store"
)

// TestLeaders: a batch's leaders are the first item of each (tenant, key),
// in byte order (upper case before lower case, whatever the database's
// collation: every statement locks records in this order); repeats, failed
// items and keyless items lead nothing, and keyless items are marked for
// creation.
func TestLeaders(t *testing.T) {
	t.Parallel()
	keys := []struct{ tenant, key string }{
		{"t", "a1"}, // 0: leader of t/a1
		{"t", "B1"}, // 1: leader of t/B1 ("B" < "a" in bytes)
		{"t", "a1"}, // 2: repeat of 0
		{"t", ""},   // 3: keyless
		{"s", "z"},  // 4: leader of s/z (tenant first)
		{"t", "c"},  // 5: failed
		{"t", "B1"}, // 6: repeat of 1
		{"t", "a"},  // 7: leader of t/a (a prefix sorts first)
	}
	k := &keyedInsert{res: make([]store.JobInsertResult, len(keys))}
	for _, key := range keys {
		k.items = append(k.items, &insertItem{p: &store.JobInsertParams{Tenant: key.tenant, IdempotencyKey: key.key}})
	}
	k.res[5].Err = errors.New("invalid")
	lead, rank := k.leaders()
	if want := []int{4, 1, 7, 0}; !slices.Equal(lead, want) {
		t.Fatalf("leaders %v, want %v", lead, want)
	}
	if want := []int{4, 2, 0, 0, 1, 0, 0, 3}; !slices.Equal(rank, want) {
		t.Fatalf("ranks %v, want %v", rank, want)
	}
	for i, it := range k.items {
		if it.create != (i == 3) {
			t.Fatalf("item %d marked for creation: %v", i, it.create)
		}
	}
}
