package idemhttp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/internal/dbtest"
)

// The hostile-input suite: what a hostile but realistic client sends. Every
// case runs on both stores and must be a 4xx problem naming the input,
// never a 5xx, and nothing may be written.

// badInput is one request that must be refused.
type badInput struct {
	name, method, path, body string
	status                   int
}

// badInputs returns the matrix; tok is the lease token of a claimed job
// whose id is id.
func badInputs(id, tok string) []badInput {
	var cases []badInput
	for _, f := range []string{"queue", "kind", "partition_key", "idempotency_key"} {
		for _, v := range []string{"%00", "%FF", "a%00b", "%C3%28"} {
			cases = append(cases,
				badInput{"list " + f + "=" + v, "GET", "/v1/jobs?" + f + "=" + v, "", 400},
				badInput{"dlq " + f + "=" + v, "GET", "/v1/dlq?" + f + "=" + v, "", 400})
		}
	}
	cases = append(cases,
		badInput{"malformed percent escape", "GET", "/v1/jobs?queue=%", "", 400},
		badInput{"malformed percent escape in kind", "GET", "/v1/jobs?kind=%zz", "", 400},
		badInput{"claim kind NUL", "POST", "/v1/claim", `{"queues":["q"],"worker_id":"w","kinds":["a\u0000"]}`, 400},
		badInput{"claim kind invalid UTF-8", "POST", "/v1/claim", "{\"queues\":[\"q\"],\"worker_id\":\"w\",\"kinds\":[\"\xff\"]}", 400},
		badInput{"claim queue NUL", "POST", "/v1/claim", `{"queues":["\u0000"],"worker_id":"w"}`, 400},
		badInput{"replay filter queue NUL", "POST", "/v1/jobs/replay", `{"filter":{"queue":"\u0000"}}`, 400},
		badInput{"replay filter kind invalid UTF-8", "POST", "/v1/jobs/replay", "{\"filter\":{\"kind\":\"\xc3\x28\"}}", 400},
		badInput{"replay filter key NUL", "POST", "/v1/jobs/replay", `{"filter":{"idempotency_key":"k\u0000"}}`, 400},
		badInput{"requeue filter partition NUL", "POST", "/v1/dlq/requeue", `{"filter":{"partition_key":"\u0000"}}`, 400},
		badInput{"requeue filter queue invalid UTF-8", "POST", "/v1/dlq/requeue", "{\"filter\":{\"queue\":\"\xff\xfe\"}}", 400},
		badInput{"fail error NUL", "POST", "/v1/jobs/" + id + "/fail", `{"lease_token":"` + tok + `","error":"a\u0000b"}`, 400},
		badInput{"fail error invalid UTF-8", "POST", "/v1/jobs/" + id + "/fail", "{\"lease_token\":\"" + tok + "\",\"error\":\"\xff\"}", 400},
		badInput{"fail token NUL", "POST", "/v1/jobs/" + id + "/fail", `{"lease_token":"\u0000","error":"x"}`, 400},
		badInput{"complete token NUL", "POST", "/v1/jobs/" + id + "/complete", `{"lease_token":"t\u0000"}`, 400},
		badInput{"heartbeat token NUL", "POST", "/v1/jobs/" + id + "/heartbeat", `{"lease_token":"t\u0000"}`, 400},
		badInput{"complete result invalid UTF-8", "POST", "/v1/jobs/" + id + "/complete", "{\"lease_token\":\"" + tok + "\",\"result\":{\"s\":\"\xff\"}}", 400},
		badInput{"complete result lone surrogate", "POST", "/v1/jobs/" + id + "/complete", `{"lease_token":"` + tok + `","result":{"s":"\ud800"}}`, 400},
		badInput{"complete result duplicate keys", "POST", "/v1/jobs/" + id + "/complete", `{"lease_token":"` + tok + `","result":{"a":1,"a":2}}`, 400},
		badInput{"args invalid UTF-8", "POST", "/v1/jobs", "{\"kind\":\"k\",\"args\":{\"s\":\"\xff\"}}", 400},
		badInput{"args lone surrogate", "POST", "/v1/jobs", `{"kind":"k","args":{"s":"\udc00"}}`, 400},
		badInput{"args number out of range", "POST", "/v1/jobs", `{"kind":"k","args":{"n":1e400}}`, 400},
		badInput{"args number out of range with key", "POST", "/v1/jobs", `{"kind":"k","args":{"n":1e400},"idempotency_key":"k1"}`, 400},
		badInput{"args duplicate keys", "POST", "/v1/jobs", `{"kind":"k","args":{"a":1,"a":2}}`, 400},
		badInput{"args duplicate keys with key", "POST", "/v1/jobs", `{"kind":"k","args":{"a":1,"a":2},"idempotency_key":"k2"}`, 400},
		badInput{"args too deep", "POST", "/v1/jobs", `{"kind":"k","args":` + nested(65) + `}`, 400},
		badInput{"metadata invalid UTF-8", "POST", "/v1/jobs", "{\"kind\":\"k\",\"metadata\":{\"s\":\"\xff\"}}", 400},
		badInput{"kind NUL", "POST", "/v1/jobs", `{"kind":"k\u0000"}`, 400},
		badInput{"queue invalid UTF-8", "POST", "/v1/jobs", "{\"kind\":\"k\",\"queue\":\"\xff\"}", 400},
		badInput{"partition key NUL", "POST", "/v1/jobs", `{"kind":"k","partition_key":"\u0000"}`, 400},
		badInput{"priority above int32", "POST", "/v1/jobs", `{"kind":"k","priority":2147483648}`, 400},
		badInput{"priority below int32", "POST", "/v1/jobs", `{"kind":"k","priority":-2147483649}`, 400},
		badInput{"priority far out", "POST", "/v1/jobs", `{"kind":"k","priority":9223372036854775807}`, 400},
		badInput{"batch item invalid UTF-8", "POST", "/v1/jobs/batch", "{\"jobs\":[{\"kind\":\"k\",\"args\":{\"s\":\"\xff\"}}]}", 400},
		badInput{"record key NUL", "GET", "/v1/idempotency/a%00b", "", 400},
		badInput{"record key invalid UTF-8", "GET", "/v1/idempotency/%FF", "", 400},
	)
	return cases
}

// nested returns an array nested depth levels deep.
func nested(depth int) string {
	return strings.Repeat("[", depth) + strings.Repeat("]", depth)
}

func TestHostileInputSQLite(t *testing.T) {
	t.Parallel()
	runHostileInput(t, openSQLite)
}

func TestHostileInputPostgres(t *testing.T) {
	t.Parallel()
	dbtest.PostgresURL(t)
	runHostileInput(t, openPostgres)
}

func runHostileInput(t *testing.T, open opener) {
	e := setup(t, open, nil)
	id := e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "q"})
	tok := e.claim(e.keyA, "q")["lease_token"].(string)
	before := e.countJobs()
	for _, c := range badInputs(id, tok) {
		r := e.req(c.method, c.path, e.keyA, bodyOrNil(c.body))
		if r.status != c.status {
			t.Errorf("%s: status %d, want %d: %s", c.name, r.status, c.status, r.body)
			continue
		}
		if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
			t.Errorf("%s: content type %q: %s", c.name, ct, r.body)
		}
	}
	if n := e.countJobs(); n != before {
		t.Fatalf("bad input wrote jobs: %d, want %d", n, before)
	}
	job := e.req("GET", "/v1/jobs/"+id, e.keyA, nil).json(t)
	if job["state"] != "running" || job["last_error"] != nil {
		t.Fatalf("bad input changed the claimed job: %v", job)
	}

	t.Run("in range values are stored unchanged", func(t *testing.T) {
		for _, p := range []float64{2147483647, -2147483648} {
			r := e.req("POST", "/v1/jobs", e.keyA, `{"kind":"k","priority":`+strconv.FormatFloat(p, 'f', 0, 64)+`}`)
			expect(t, r, 201, "")
			got := e.req("GET", "/v1/jobs/"+r.job(t)["id"].(string), e.keyA, nil).json(t)
			if got["priority"] != p {
				t.Fatalf("priority %v stored as %v", p, got["priority"])
			}
		}
		r := e.req("POST", "/v1/jobs", e.keyA, `{"kind":"k","args":`+nested(64)+`,"idempotency_key":"deep"}`)
		expect(t, r, 201, "")
		r = e.req("POST", "/v1/jobs", e.keyA, `{"kind":"k","args":{"s":"\u00e9\ud83d\ude00","z":"\u0000"}}`)
		expect(t, r, 201, "")
	})

	t.Run("list replies stay valid JSON", func(t *testing.T) {
		r := e.req("GET", "/v1/jobs?limit=500", e.keyA, nil)
		expect(t, r, 200, "")
		if !json.Valid(r.body) || !utf8.Valid(r.body) {
			t.Fatalf("list reply is not valid UTF-8 JSON")
		}
	})
}

// bodyOrNil sends no body for "".
func bodyOrNil(b string) any {
	if b == "" {
		return nil
	}
	return b
}

// TestBigPagesBounded: a list over big jobs ends each page early at
// MaxPageBytes with next_cursor, the pages together hold every job once,
// and the memory a page costs is bounded by the cap, not by limit × job
// size. Not parallel: it measures the process's allocations.
func TestBigPagesBounded(t *testing.T) {
	const jobs, argBytes, pageCap = 60, 512 << 10, 2 << 20
	e := setup(t, openSQLite, &setupOpts{serverCfg: &idemhttp.Config{MaxPageBytes: pageCap}})
	big := `{"pad":"` + strings.Repeat("x", argBytes) + `"}`
	items := make([]idem.EnqueueParams, jobs)
	for i := range items {
		items[i] = idem.EnqueueParams{Kind: "k", Args: json.RawMessage(big), Opts: &idem.EnqueueOpts{Tenant: "a"}}
	}
	if _, err := e.client.EnqueueMany(context.Background(), items); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var maxAlloc uint64
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > jobs {
			t.Fatal("pagination does not end")
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		r := e.req("GET", "/v1/jobs?limit=500"+cursor, e.keyA, nil)
		runtime.ReadMemStats(&after)
		maxAlloc = max(maxAlloc, after.TotalAlloc-before.TotalAlloc)
		expect(t, r, 200, "")
		if len(r.body) > pageCap+argBytes {
			t.Fatalf("page of %d bytes, cap %d", len(r.body), pageCap)
		}
		var page struct {
			Jobs []struct {
				ID string `json:"id"`
			} `json:"jobs"`
			NextCursor string `json:"next_cursor"`
		}
		if err := json.Unmarshal(r.body, &page); err != nil || len(page.Jobs) == 0 {
			t.Fatalf("page %d: %v (%d jobs)", pages, err, len(page.Jobs))
		}
		for _, j := range page.Jobs {
			if seen[j.ID] {
				t.Fatalf("job %s on two pages", j.ID)
			}
			seen[j.ID] = true
		}
		if page.NextCursor == "" {
			break
		}
		cursor = "&cursor=" + page.NextCursor
	}
	if len(seen) != jobs {
		t.Fatalf("pages held %d jobs, want %d", len(seen), jobs)
	}
	// Every job together is 30 MiB; one page may cost a few copies of the
	// cap and of one store chunk (8 jobs), never the whole list.
	if limit := uint64(32 * pageCap); maxAlloc > limit {
		t.Fatalf("one page allocated %d MiB, want at most %d MiB", maxAlloc>>20, limit>>20)
	}
	t.Logf("largest allocation of one page: %.1f MiB (all jobs: %d MiB)", float64(maxAlloc)/(1<<20), jobs*argBytes>>20)
}

// TestListPagesAcrossChunks: a list page is read from the store in chunks
// (8 jobs first, then sized by the bytes left); pages longer than one chunk
// hold exactly limit jobs, or as many as fit in MaxPageBytes (a job more
// would not fit), and the pages together hold every job once, newest first.
func TestListPagesAcrossChunks(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name            string
		jobs, argBytes  int
		maxPage         int64
		limit           int
		wantFullByCount bool // every page but the last holds limit jobs
	}{
		{"limit 20 over 45 small jobs", 45, 10, 0, 20, true},
		{"limit 9, one past the first chunk", 19, 10, 0, 9, true},
		{"limit 100 over 130 small jobs", 130, 10, 0, 100, true},
		{"byte cap in the second chunk", 40, 1000, 12_000, 500, false},
		{"byte cap after several chunks", 60, 200, 9_000, 500, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var cfg *idemhttp.Config
			if c.maxPage > 0 {
				cfg = &idemhttp.Config{MaxPageBytes: c.maxPage}
			}
			e := setup(t, openSQLite, &setupOpts{serverCfg: cfg})
			args := json.RawMessage(`{"pad":"` + strings.Repeat("x", c.argBytes) + `"}`)
			items := make([]idem.EnqueueParams, c.jobs)
			for i := range items {
				items[i] = idem.EnqueueParams{Kind: "k", Args: args, Opts: &idem.EnqueueOpts{Tenant: "a"}}
			}
			res, err := e.client.EnqueueMany(context.Background(), items)
			if err != nil {
				t.Fatal(err)
			}
			var pages [][]json.RawMessage
			cursor := ""
			for len(pages) <= c.jobs {
				r := e.req("GET", fmt.Sprintf("/v1/jobs?limit=%d%s", c.limit, cursor), e.keyA, nil)
				expect(t, r, 200, "")
				var page struct {
					Jobs       []json.RawMessage `json:"jobs"`
					NextCursor string            `json:"next_cursor"`
				}
				if err := json.Unmarshal(r.body, &page); err != nil {
					t.Fatal(err)
				}
				pages = append(pages, page.Jobs)
				if page.NextCursor == "" {
					break
				}
				cursor = "&cursor=" + url.QueryEscape(page.NextCursor)
			}
			var ids []string
			for i, p := range pages {
				size := 0
				for _, j := range p {
					var job struct {
						ID string `json:"id"`
					}
					if err := json.Unmarshal(j, &job); err != nil {
						t.Fatal(err)
					}
					ids = append(ids, job.ID)
					size += len(j)
				}
				if i == len(pages)-1 {
					continue
				}
				if c.wantFullByCount && len(p) != c.limit {
					t.Fatalf("page %d holds %d jobs, want %d", i, len(p), c.limit)
				}
				if c.maxPage > 0 {
					next := pages[i+1][0]
					if int64(size) > c.maxPage || int64(size+len(next)) <= c.maxPage || len(p) <= 8 {
						t.Fatalf("page %d: %d jobs, %d bytes; the next job (%d bytes) would fit in %d, or the page did not pass one chunk",
							i, len(p), size, len(next), c.maxPage)
					}
				}
			}
			if len(ids) != c.jobs {
				t.Fatalf("pages hold %d jobs, want %d", len(ids), c.jobs)
			}
			for i, id := range ids {
				if want := fmt.Sprint(res[len(res)-1-i].Job.ID); id != want {
					t.Fatalf("job %d of the pages is %s, want %s (newest first, each once)", i, id, want)
				}
			}
		})
	}
}
