package idemhttp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp"
)

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
