package store_test

import (
	"testing"

	"github.com/idem-dev/idem/store"
)

// TestCancelNoticeRoundTrip: a cancel notice reads back as its lease, and
// no queue name (printable ASCII without spaces), nor "", reads as one.
func TestCancelNoticeRoundTrip(t *testing.T) {
	t.Parallel()
	l := store.Lease{ID: 42, Token: "0123456789abcdef0123456789abcdef"}
	if got, ok := store.ParseCancelNotice(store.CancelNotice(l)); !ok || got != l {
		t.Fatalf("ParseCancelNotice(CancelNotice(%+v)) = %+v, %v", l, got, ok)
	}
	for _, v := range []string{"", "default", "cancel", "cancel:1", "cancel 1", "cancel x tok", "cancel 0 tok", "cancel -1 tok"} {
		if got, ok := store.ParseCancelNotice(v); ok {
			t.Errorf("ParseCancelNotice(%q) = %+v, want no notice", v, got)
		}
	}
}
