package idemclient_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemclient"
	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// requeueBodies records the ids of every POST /v1/dlq/requeue, in order.
type requeueBodies struct {
	mu   sync.Mutex
	sent [][]string
}

func (rb *requeueBodies) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/dlq/requeue" {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var req struct {
				IDs []string `json:"ids"`
			}
			_ = json.Unmarshal(body, &req)
			rb.mu.Lock()
			rb.sent = append(rb.sent, req.IDs)
			rb.mu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}

// TestDLQRequeueManyIDsOldestFirst: DLQRequeue takes any number of ids and
// sends them in requests the server takes (1,000 ids each), oldest (lowest
// id) first — a worker may claim between two requests, and a FIFO
// partition whose newer dead job came back first would run it before its
// older one.
func TestDLQRequeueManyIDsOldestFirst(t *testing.T) {
	t.Parallel()
	rb := &requeueBodies{}
	e := newAPI(t, rb.wrap)
	ctx := context.Background()
	reqs := make([]*idemclient.EnqueueRequest, 1000)
	for i := range reqs {
		reqs[i] = &idemclient.EnqueueRequest{Kind: "k", Queue: "dq", MaxAttempts: 1}
	}
	if _, err := e.admin.EnqueueBatch(ctx, reqs); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.EnqueueBatch(ctx, reqs[:2]); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	jobs, err := e.st.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"dq"}, WorkerID: "w", Limit: 1002,
		LeaseUntil: now.Add(time.Minute), Now: now})
	if err != nil || len(jobs) != 1002 {
		t.Fatalf("claim: %d %v", len(jobs), err)
	}
	fins := make([]*store.JobFinishParams, len(jobs))
	var ids []string
	for i, j := range jobs {
		fins[i] = &store.JobFinishParams{ID: j.ID, LeaseToken: j.LeaseToken, State: idemtype.StateDead,
			Outcome: idemtype.OutcomeDead, Error: "boom", FinishedAt: now}
		ids = append(ids, strconv.FormatInt(j.ID, 10))
	}
	if errs, err := e.st.JobFinishMany(ctx, fins); err != nil || errors.Join(errs...) != nil {
		t.Fatalf("finish: %v %v", err, errors.Join(errs...))
	}
	want := slices.Clone(ids)
	slices.SortFunc(want, func(a, b string) int { return cmp.Compare(len(a), len(b))*2 + cmp.Compare(a, b) })
	slices.Reverse(ids) // newest first, as a listing gives them
	n, err := e.admin.DLQRequeue(ctx, ids, nil)
	if err != nil || n != len(ids) {
		t.Fatalf("requeue of %d ids: %d, %v", len(ids), n, err)
	}
	rb.mu.Lock()
	defer rb.mu.Unlock()
	if len(rb.sent) != 2 || !slices.Equal(rb.sent[0], want[:1000]) || !slices.Equal(rb.sent[1], want[1000:]) {
		t.Fatalf("requests of %d ids; want two, 1,000 then 2, oldest first (first ids sent: %v)", len(rb.sent), rb.sent[0][:3])
	}
}
