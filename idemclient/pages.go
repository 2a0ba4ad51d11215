package idemclient

import (
	"context"
	"iter"
)

// AllJobs returns every job that p selects, newest first, fetching page
// after page as the loop asks for more (p.Limit is the page size; zero
// leaves it to the server; p.Cursor, when set, is where the first page
// starts). A failed page is yielded once as (nil, err) and ends the
// sequence; breaking out of the loop fetches nothing more. p is not
// changed.
//
//	for job, err := range cl.AllJobs(ctx, &idemclient.ListParams{Filter: f}) {
//		if err != nil {
//			return err
//		}
//		…
//	}
func (cl *Client) AllJobs(ctx context.Context, p *ListParams) iter.Seq2[*Job, error] {
	return allPages(ctx, p, cl.ListJobs)
}

// AllDead is AllJobs over the dead jobs (GET /v1/dlq), newest first.
func (cl *Client) AllDead(ctx context.Context, p *ListParams) iter.Seq2[*Job, error] {
	return allPages(ctx, p, cl.DLQList)
}

// allPages yields the jobs of the pages list returns, from p's cursor on.
func allPages(ctx context.Context, p *ListParams, list func(context.Context, *ListParams) (*JobPage, error)) iter.Seq2[*Job, error] {
	return func(yield func(*Job, error) bool) {
		var page ListParams
		if p != nil {
			page = *p
		}
		for {
			res, err := list(ctx, &page)
			if err != nil {
				yield(nil, err)
				return
			}
			for _, j := range res.Jobs {
				if !yield(j, nil) {
					return
				}
			}
			if res.NextCursor == "" || len(res.Jobs) == 0 {
				return
			}
			page.Cursor = res.NextCursor
		}
	}
}
