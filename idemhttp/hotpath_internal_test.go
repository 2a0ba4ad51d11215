package idemhttp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
)

// TestReadUpToAsReadAll holds readUpTo (the request body under the limit,
// its buffer sized by Content-Length) to what it replaced,
// io.ReadAll(io.LimitReader(r, n)): the same bytes and error for bodies
// shorter than, as long as and longer than both the declared length and
// the limit, and for readers that return data with EOF, one byte at a
// time, or fail midway.
func TestReadUpToAsReadAll(t *testing.T) {
	boom := errors.New("boom")
	readers := map[string]func(string) io.Reader{
		"plain":    func(s string) io.Reader { return strings.NewReader(s) },
		"one byte": func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) },
		"data+EOF": func(s string) io.Reader { return iotest.DataErrReader(strings.NewReader(s)) },
		"half+fail": func(s string) io.Reader {
			return io.MultiReader(strings.NewReader(s[:len(s)/2]), iotest.ErrReader(boom))
		},
		"data+fail": func(s string) io.Reader { return &dataErrReader{data: s, err: boom} },
	}
	for name, mk := range readers {
		for _, size := range []int{0, 1, 7, 63, 64, 65, 511, 512, 513, 1500, maxBodyPrealloc + 10} {
			body := strings.Repeat("x", size)
			for _, n := range []int64{1, 2, 64, 65, 512, 513, 1024, 4096, maxBodyPrealloc + 5, 1 << 20} {
				for _, declared := range []int64{-1, 0, int64(size) - 1, int64(size), int64(size) + 1, n - 1, n, n + 1, 1 << 40} {
					want, wantErr := io.ReadAll(io.LimitReader(mk(body), n))
					got, gotErr := readUpTo(mk(body), n, declared)
					if !bytes.Equal(got, want) || !errors.Is(gotErr, wantErr) && gotErr != wantErr {
						t.Fatalf("%s: body %d, n %d, declared %d: got %d bytes, %v; want %d bytes, %v",
							name, size, n, declared, len(got), gotErr, len(want), wantErr)
					}
				}
			}
		}
	}
}

// TestReadUpToPreallocBounded: a declared length is the client's word; no
// more than maxBodyPrealloc is allocated for it before the bytes arrive.
func TestReadUpToPreallocBounded(t *testing.T) {
	b, err := readUpTo(strings.NewReader("{}"), 1<<20+1, 1<<20)
	if err != nil || string(b) != "{}" || cap(b) > maxBodyPrealloc {
		t.Fatalf("readUpTo: %q, cap %d, %v; want {} in at most %d bytes", b, cap(b), err, maxBodyPrealloc)
	}
}

// dataErrReader returns all its data with err in one read.
type dataErrReader struct {
	data string
	err  error
	done bool
}

func (r *dataErrReader) Read(p []byte) (int, error) {
	if r.done {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	if r.data == "" {
		r.done = true
		return n, r.err
	}
	return n, nil
}

// TestCleanSegmentsAsSplit holds cleanSegments to its definition: no
// segment after the first "/" (strings.Split) is empty, "." or "..".
func TestCleanSegmentsAsSplit(t *testing.T) {
	want := func(escaped string) bool {
		for _, seg := range strings.Split(escaped, "/")[1:] {
			if seg == "" || seg == "." || seg == ".." {
				return false
			}
		}
		return true
	}
	for _, p := range []string{"", "/", "//", "v1", "/v1", "/v1/", "/v1/jobs", "/v1/jobs/", "/v1//jobs", "/v1/./jobs",
		"/v1/../jobs", "/v1/jobs/.", "/v1/jobs/..", "/v1/jobs/...", "/v1/jobs/.x", "/v1/jobs/%2E", "x/y", "x//y", "x/",
		"/v1/idempotency/a/lease/renew", "/v1/idempotency/a/lease/renew/.."} {
		if got := cleanSegments(p); got != want(p) {
			t.Errorf("cleanSegments(%q) = %v, want %v", p, got, want(p))
		}
	}
}

// TestHashAPIKeyLengths: the hash written without allocating is hex
// SHA-256 of the secret, at and past the bearer limit too.
func TestHashAPIKeyLengths(t *testing.T) {
	for _, n := range []int{0, 1, 48, maxBearerLen - 1, maxBearerLen, maxBearerLen + 1, 4096} {
		secret := strings.Repeat("k", n)
		sum := sha256.Sum256([]byte(secret))
		if got, want := HashAPIKey(secret), hex.EncodeToString(sum[:]); got != want {
			t.Fatalf("HashAPIKey of %d bytes = %s, want %s", n, got, want)
		}
	}
}

// TestHeaderNamesCanonical: headerValue and setHeader index the header
// map directly, which is Header.Get and Header.Set only for a name in
// canonical form; every name the server passes them is.
func TestHeaderNamesCanonical(t *testing.T) {
	for _, name := range []string{"Authorization", "Content-Type", "Origin", "Location", "X-Content-Type-Options",
		headerTenant, headerRequestID, headerIdempotentReplayed, headerIdempotencyKey} {
		if c := http.CanonicalHeaderKey(name); c != name {
			t.Errorf("%q is not canonical (%q)", name, c)
		}
	}
	h := http.Header{}
	h.Add("authorization", "Bearer x")
	if got := headerValue(h, "Authorization"); got != h.Get("Authorization") {
		t.Fatalf("headerValue = %q, Get = %q", got, h.Get("Authorization"))
	}
	setHeader(h, "Location", "/v1/jobs/1")
	if h.Get("Location") != "/v1/jobs/1" || len(h.Values("Location")) != 1 {
		t.Fatalf("setHeader: %v", h)
	}
}
