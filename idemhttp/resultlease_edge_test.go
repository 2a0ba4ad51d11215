package idemhttp_test

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/internal/dbtest"
)

func TestResultLeaseEdgesSQLite(t *testing.T) {
	t.Parallel()
	testResultLeaseEdges(t, openSQLite)
}

func TestResultLeaseEdgesPostgres(t *testing.T) {
	t.Parallel()
	dbtest.PostgresURL(t) // skips loudly without a server
	testResultLeaseEdges(t, openPostgres)
}

// testResultLeaseEdges: concurrent acquires over HTTP give one lease; a
// wrong token renews and completes nothing (409) and releases nothing; the
// holder's lease ends with its complete, after which its token is lost; a
// key of the longest length works as a lease key and as an Idempotency-Key.
func testResultLeaseEdges(t *testing.T, open opener) {
	e := setup(t, open, nil)
	base := "/v1/idempotency/" + strings.Repeat("k", 255)
	body := map[string]any{"lease": "1m"}
	const n = 8
	out := make([]*resp, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = e.req("POST", base+"/lease", e.keyA, body, "Idempotency-Key", fmt.Sprintf("%0255d", i))
		}()
	}
	wg.Wait()
	token := ""
	for i, r := range out {
		switch r.status {
		case 200:
			if token != "" {
				t.Fatalf("two leases: %s and %s", token, r.body)
			}
			token = r.json(t)["lease_token"].(string)
		case 409:
			expect(t, r, 409, "/problems/idempotency-key-in-progress")
		default:
			t.Fatalf("acquire %d: %d %s", i, r.status, r.body)
		}
	}
	if token == "" {
		t.Fatal("no acquire got the lease")
	}
	wrong := map[string]any{"lease_token": "1." + strings.Repeat("0", 32)}
	for _, r := range []*resp{e.req("POST", base+"/lease/renew", e.keyA, wrong),
		e.req("POST", base+"/lease/complete", e.keyA, map[string]any{"lease_token": wrong["lease_token"], "result": 1})} {
		expect(t, r, 409, "/problems/lease-lost")
		// The detail names the caller's key, never the stored one (an
		// internal namespace: a control byte, "do", the key) or the
		// chain of internal steps.
		if d, _ := r.json(t)["detail"].(string); strings.Contains(d, "\x1f") || strings.Contains(d, `\u001f`) ||
			strings.Contains(d, "record") || !strings.Contains(d, strings.Repeat("k", 255)) {
			t.Fatalf("lease-lost detail %q: want the caller's key and no internal record key", d)
		}
	}
	expect(t, e.req("POST", base+"/lease/release", e.keyA, wrong), 204, "")
	expect(t, e.req("POST", base+"/lease", e.keyA, body), 409, "/problems/idempotency-key-in-progress")
	// Another tenant's lease on the key is its own.
	expect(t, e.req("POST", base+"/lease", e.keyB, body), 200, "")
	expect(t, e.req("POST", base+"/lease/renew", e.keyA, map[string]any{"lease_token": token}), 200, "")
	expect(t, e.req("POST", base+"/lease/complete", e.keyA, map[string]any{"lease_token": token, "result": map[string]any{"n": 1}}), 200, "")
	expect(t, e.req("POST", base+"/lease/renew", e.keyA, map[string]any{"lease_token": token}), 409, "/problems/lease-lost")
	expect(t, e.req("POST", base+"/lease/complete", e.keyA, map[string]any{"lease_token": token, "result": 2}), 409, "/problems/lease-lost")
	r := e.req("POST", base+"/lease", e.keyA, body)
	expect(t, r, 200, "")
	if m := r.json(t); m["cached"] != true || fmt.Sprint(m["result"]) != "map[n:1]" {
		t.Fatalf("acquire after complete: %s", r.body)
	}
}

func TestLargeLeaseCompleteReplaysSQLite(t *testing.T) {
	t.Parallel()
	testLargeLeaseCompleteReplays(t, openSQLite)
}

func TestLargeLeaseCompleteReplaysPostgres(t *testing.T) {
	t.Parallel()
	dbtest.PostgresURL(t) // skips loudly without a server
	testLargeLeaseCompleteReplays(t, openPostgres)
}

// testLargeLeaseCompleteReplays: the retry (same Idempotency-Key) of a
// lease complete whose reply was lost gets that reply, whatever the size
// of a result the server took. The reply echoes the result with the key,
// so a result near the body limit made a reply over the middleware's
// 1 MiB: it was not stored, and the retry ran the complete again and
// answered 409 lease-lost for a result that was stored.
func testLargeLeaseCompleteReplays(t *testing.T, open opener) {
	e := setup(t, open, nil)
	base := "/v1/idempotency/" + strings.Repeat("k", 255)
	r := e.req("POST", base+"/lease", e.keyA, map[string]any{"lease": "1m"})
	expect(t, r, 200, "")
	token := r.json(t)["lease_token"].(string)
	// The body {"lease_token":"…","result":"…"} is just within the limit.
	big := strings.Repeat("r", idemhttp.DefaultMaxBodyBytes-len(token)-40)
	done := map[string]any{"lease_token": token, "result": big}
	first := e.req("POST", base+"/lease/complete", e.keyA, done, "Idempotency-Key", "done-big")
	expect(t, first, 200, "")
	retry := e.req("POST", base+"/lease/complete", e.keyA, done, "Idempotency-Key", "done-big")
	expect(t, retry, 200, "")
	if retry.header.Get("Idempotent-Replayed") != "true" || string(retry.body) != string(first.body) {
		t.Fatalf("retry of the complete: %v, %d bytes (first %d)", retry.header, len(retry.body), len(first.body))
	}
}

// TestLeaseCompleteLargestResultReplays: the cap up to which a result
// lease's replies are stored holds the largest result a complete takes
// (MaxArgsBytes, whatever the body limit) written in the characters JSON
// escaped most ('<', '&', U+2028), with the longest key: the
// retry after a lost reply replays it byte for byte, and a result one
// byte longer is refused. (The cap was six times the body limit while
// replies were HTML-escaped.)
func TestLeaseCompleteLargestResultReplays(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, &setupOpts{serverCfg: &idemhttp.Config{MaxBodyBytes: 4 << 20}})
	base := "/v1/idempotency/" + strings.Repeat("k", idem.MaxKeyLength)
	r := e.req("POST", base+"/lease", e.keyA, map[string]any{"lease": "1m"})
	expect(t, r, 200, "")
	token := r.json(t)["lease_token"].(string)
	fill := strings.Repeat("<&\u2028", (idem.MaxArgsBytes-2)/5)
	result := `"` + fill + strings.Repeat("<", idem.MaxArgsBytes-2-len(fill)) + `"`
	complete := func(result string) string {
		return `{"lease_token":` + strconv.Quote(token) + `,"result":` + result + `}`
	}
	over := e.req("POST", base+"/lease/complete", e.keyA, complete(`"<`+result[1:]), "Idempotency-Key", "done-over")
	expect(t, over, 400, "/problems/invalid-request")
	first := e.req("POST", base+"/lease/complete", e.keyA, complete(result), "Idempotency-Key", "done-max")
	expect(t, first, 200, "")
	retry := e.req("POST", base+"/lease/complete", e.keyA, complete(result), "Idempotency-Key", "done-max")
	expect(t, retry, 200, "")
	if retry.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(retry.body, first.body) {
		t.Fatalf("retry of the complete: %v, %d bytes (first %d)", retry.header, len(retry.body), len(first.body))
	}
}
