package idemclient_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemclient"
)

// countLists counts the GET requests of path.
func countLists(path string, n *atomic.Int64) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && r.URL.Path == path {
				n.Add(1)
			}
			next.ServeHTTP(w, r)
		})
	}
}

// TestAllJobsPages: AllJobs yields every selected job once, newest first,
// across pages; a loop that breaks early fetches no further page; a
// refused filter is yielded as the error, once.
func TestAllJobsPages(t *testing.T) {
	t.Parallel()
	var lists atomic.Int64
	e := newAPI(t, countLists("/v1/jobs", &lists))
	ctx := context.Background()
	var want []string
	for range 7 {
		want = append(want, e.enqueue(e.admin, &idemclient.EnqueueRequest{Kind: "k", Queue: "pages"}).ID)
	}
	e.enqueue(e.admin, &idemclient.EnqueueRequest{Kind: "k", Queue: "other"})
	var got []string
	for j, err := range e.admin.AllJobs(ctx, &idemclient.ListParams{Filter: idemclient.Filter{Queue: "pages"}, Limit: 3}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, j.ID)
	}
	if len(got) != len(want) {
		t.Fatalf("got %v; want the 7 jobs of the queue %v", got, want)
	}
	for i := range got {
		if got[i] != want[len(want)-1-i] {
			t.Fatalf("got %v; want newest first %v", got, want)
		}
	}
	if n := lists.Load(); n != 3 {
		t.Fatalf("%d list requests for 7 jobs in pages of 3; want 3", n)
	}

	lists.Store(0)
	seen := 0
	for _, err := range e.admin.AllJobs(ctx, &idemclient.ListParams{Filter: idemclient.Filter{Queue: "pages"}, Limit: 3}) {
		if err != nil {
			t.Fatal(err)
		}
		if seen++; seen == 2 {
			break
		}
	}
	if n := lists.Load(); n != 1 {
		t.Fatalf("a loop that stopped within the first page made %d requests; want 1", n)
	}

	errs := 0
	for j, err := range e.admin.AllJobs(ctx, &idemclient.ListParams{Filter: idemclient.Filter{States: []string{"no such state"}}}) {
		if j != nil || !errors.Is(err, idem.ErrInvalid) {
			t.Fatalf("a refused filter yields (%v, %v); want (nil, invalid input)", j, err)
		}
		errs++
	}
	if errs != 1 {
		t.Fatalf("the error came %d times; want once", errs)
	}
}

// TestAllDeadPages: AllDead pages through the dead jobs only.
func TestAllDeadPages(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	ctx := context.Background()
	var dead []string
	for range 3 {
		e.enqueue(e.admin, &idemclient.EnqueueRequest{Kind: "k", Queue: "dq", MaxAttempts: 1})
		j := e.claimOne(e.admin, "dq")
		if _, err := e.admin.Fail(ctx, j.ID, j.LeaseToken, &idemclient.FailRequest{Error: "boom", NoRetry: true}); err != nil {
			t.Fatal(err)
		}
		dead = append(dead, j.ID)
	}
	e.enqueue(e.admin, &idemclient.EnqueueRequest{Kind: "k", Queue: "dq"})
	var got []string
	for j, err := range e.admin.AllDead(ctx, &idemclient.ListParams{Limit: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, j.ID)
	}
	if len(got) != 3 || got[0] != dead[2] || got[2] != dead[0] {
		t.Fatalf("dead jobs %v; want %v newest first", got, dead)
	}
}
