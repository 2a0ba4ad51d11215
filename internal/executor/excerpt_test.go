package executor

import (
	"bytes"
	"compress/gzip"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// TestExcerpt: a response body is cut at n bytes on a rune boundary and
// marked as cut; one that fits is returned whole, unmarked.
func TestExcerpt(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"abc", 3, "abc"},   // exactly n: whole
		{"abcd", 3, "abc…"}, // cut after n ASCII bytes
		{"ab€", 4, "ab…"},   // € is 3 bytes: the cut falls inside it and backs off
		{"€€", 3, "€…"},     // a cut on the boundary keeps the whole rune
		{"", 3, ""},         // empty stays empty
		{"abc", 0, "…"},     // nothing fits
	} {
		if got := excerpt([]byte(c.in), c.n); got != c.want {
			t.Errorf("excerpt(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

// TestEncodeResultThreshold: results longer than the threshold are
// compressed (when that makes them smaller), results of exactly the
// threshold are not, a negative threshold never compresses, and the hash
// is always the original's.
func TestEncodeResultThreshold(t *testing.T) {
	t.Parallel()
	big := []byte(`{"v":"` + strings.Repeat("x", 200) + `"}`)
	plain, err := EncodeResult(big, -1)
	if err != nil || plain.Compressed || !bytes.Equal(plain.Bytes, big) {
		t.Fatalf("threshold -1: %+v %v, want uncompressed", plain, err)
	}
	at, err := EncodeResult(big, len(big))
	if err != nil || at.Compressed {
		t.Fatalf("threshold = length: compressed %v %v, want not", at.Compressed, err)
	}
	for _, threshold := range []int{0, len(big) - 1} {
		z, err := EncodeResult(big, threshold)
		if err != nil || !z.Compressed || len(z.Bytes) >= len(big) {
			t.Fatalf("threshold %d: compressed %v (%d bytes) %v, want gzip smaller than %d", threshold, z.Compressed, len(z.Bytes), err, len(big))
		}
		r, err := gzip.NewReader(bytes.NewReader(z.Bytes))
		if err != nil {
			t.Fatal(err)
		}
		back, err := io.ReadAll(r)
		if err != nil || !bytes.Equal(back, big) {
			t.Fatalf("threshold %d: gunzip gives %q %v", threshold, back, err)
		}
		if z.Hash != plain.Hash {
			t.Errorf("threshold %d: hash %s, want the original's %s", threshold, z.Hash, plain.Hash)
		}
	}
	// Incompressible bytes stay as they are even above the threshold.
	short := []byte(`"a"`)
	if s, err := EncodeResult(short, 0); err != nil || s.Compressed || !bytes.Equal(s.Bytes, short) {
		t.Errorf("3 bytes: %+v %v, want stored as is (gzip would be larger)", s, err)
	}
}

// TestNewNeedsPositiveLease: with every required field set, a zero or
// negative lease is still refused, and a positive one accepted.
func TestNewNeedsPositiveLease(t *testing.T) {
	t.Parallel()
	st, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "idem.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg := func(lease time.Duration) *Config {
		return &Config{Store: st, Now: time.Now, LeaseDuration: lease,
			ResultTTL:  func(string) time.Duration { return 0 },
			RetryDelay: func(*idemtype.JobRow) time.Duration { return 0 },
			Handler:    func(string) Handler { return nil }}
	}
	for _, d := range []time.Duration{0, -time.Second} {
		if _, err := New(cfg(d)); err == nil {
			t.Errorf("lease %v accepted", d)
		}
	}
	if _, err := New(cfg(time.Second)); err != nil {
		t.Errorf("lease 1s: %v", err)
	}
}
