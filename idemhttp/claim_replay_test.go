package idemhttp_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store"
)

// TestClaimRetryLargeReplySameJobs: a claim whose reply is lost is
// retried with its Idempotency-Key and must get the same jobs, not more,
// however large the reply: jobs with large args make a claim reply above
// the middleware's 1 MiB for stored responses. That reply was not stored,
// so the retry claimed the next jobs while the first ones stayed leased
// to nobody until the rescuer took them back, an attempt lost each.
func TestClaimRetryLargeReplySameJobs(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]opener{"sqlite": openSQLite, "postgres": openPostgres} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testClaimRetryLargeReply(t, open)
		})
	}
}

func testClaimRetryLargeReply(t *testing.T, open opener) {
	e := setup(t, open, nil)
	big := strings.Repeat("x", 600<<10)
	for range 4 {
		e.enqueue(e.keyA, map[string]any{"kind": "pull", "queue": "big", "args": map[string]any{"blob": big}})
	}
	claim := map[string]any{"queues": []string{"big"}, "worker_id": "w1", "limit": 2, "lease": "60s"}
	first := e.req("POST", "/v1/claim", e.keyA, claim, "Idempotency-Key", "claim-1")
	expect(t, first, 200, "")
	// The reply is lost: the worker sends the same claim again.
	again := e.req("POST", "/v1/claim", e.keyA, claim, "Idempotency-Key", "claim-1")
	expect(t, again, 200, "")
	ids := func(r *resp) []string {
		jobs, _ := r.json(t)["jobs"].([]any)
		var out []string
		for _, j := range jobs {
			out = append(out, j.(map[string]any)["id"].(string))
		}
		return out
	}
	a, b := ids(first), ids(again)
	if len(a) != 2 || strings.Join(a, ",") != strings.Join(b, ",") {
		t.Fatalf("claim %v, its retry with the same key %v: want the same jobs", a, b)
	}
	if got := again.header.Get("Idempotent-Replayed"); got != "true" {
		t.Errorf("retry: Idempotent-Replayed %q, want true", got)
	}
	running, _, err := e.st.JobList(context.Background(), &store.JobListParams{Filter: store.JobFilter{States: []idem.JobState{idem.StateRunning}}, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(running) != 2 {
		t.Errorf("%d jobs running after the claim and its retry, want 2", len(running))
	}
}

// TestLargeJobReplyReplayed: the retry (same Idempotency-Key, the reply
// lost) of a fail, a complete or a cancel whose reply is one job with
// large args and metadata (over the middleware's 1 MiB) must replay the
// first answer. That reply was not stored, so the retry ran again and
// answered 409 (lease lost, already cancelled) for a call that worked.
func TestLargeJobReplyReplayed(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	big := strings.Repeat("x", 600<<10)
	blob, _ := json.Marshal(map[string]any{"blob": big})
	// Through the library: the HTTP enqueue takes bodies up to 1 MiB.
	enqueue := func() string {
		t.Helper()
		res, err := e.client.EnqueueRaw(context.Background(), idem.EnqueueParams{Kind: "pull", Args: blob,
			Opts: &idem.EnqueueOpts{Tenant: "a", Queue: "big", Metadata: blob}})
		if err != nil {
			t.Fatal(err)
		}
		return strconv.FormatInt(res.Job.ID, 10)
	}
	claimOne := func() (id, token string) {
		t.Helper()
		enqueue()
		r := e.req("POST", "/v1/claim", e.keyA, map[string]any{"queues": []string{"big"}, "worker_id": "w1"})
		expect(t, r, 200, "")
		jobs, _ := r.json(t)["jobs"].([]any)
		if len(jobs) != 1 {
			t.Fatalf("claim: %s", r.body[:min(len(r.body), 300)])
		}
		j := jobs[0].(map[string]any)
		return j["id"].(string), j["lease_token"].(string)
	}
	id, token := claimOne()
	fail := map[string]any{"lease_token": token, "error": "boom"}
	completeID, completeToken := claimOne()
	complete := map[string]any{"lease_token": completeToken, "result": map[string]any{"blob": big}}
	for _, c := range []struct {
		path string
		body map[string]any
	}{
		{"/v1/jobs/" + id + "/fail", fail},
		{"/v1/jobs/" + completeID + "/complete", complete},
		{"/v1/jobs/" + enqueue() + "/cancel", map[string]any{}},
	} {
		first := e.req("POST", c.path, e.keyA, c.body, "Idempotency-Key", "k"+c.path)
		expect(t, first, 200, "")
		again := e.req("POST", c.path, e.keyA, c.body, "Idempotency-Key", "k"+c.path)
		if again.status != 200 || again.header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("retry of %s with its key: %d (replayed %q), want the first 200 replayed: %s", c.path,
				again.status, again.header.Get("Idempotent-Replayed"), again.body[:min(len(again.body), 300)])
		}
	}
}
