package idemhttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp"
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

// maxObject is a JSON object of exactly idem.MaxArgsBytes bytes whose one
// string is filler repeated.
func maxObject(filler string) []byte {
	const frame = len(`{"b":""}`)
	n := (idem.MaxArgsBytes - frame) / len(filler)
	s := strings.Repeat(filler, n) + strings.Repeat("x", idem.MaxArgsBytes-frame-n*len(filler))
	return []byte(`{"b":"` + s + `"}`)
}

// completeReplayed claims the one job of queue "big" (failing it first
// with failErr when not ""), completes it with result under an
// Idempotency-Key and sends the same complete again: the retry must replay
// the first answer byte for byte.
func completeReplayed(t *testing.T, e *env, failErr string, result []byte) {
	t.Helper()
	claim := func() (id, token string) {
		t.Helper()
		j := e.claim(e.keyA, "big")
		return j["id"].(string), j["lease_token"].(string)
	}
	id, token := claim()
	if failErr != "" {
		r := e.req("POST", "/v1/jobs/"+id+"/fail", e.keyA, map[string]any{"lease_token": token, "error": failErr, "retry_after": "0s"})
		expect(t, r, 200, "")
		if id, token = claim(); id == "" {
			t.Fatal("no job to claim after the fail")
		}
	}
	body := `{"lease_token":` + strconv.Quote(token) + `,"result":` + string(result) + `}`
	first := e.req("POST", "/v1/jobs/"+id+"/complete", e.keyA, body, "Idempotency-Key", "done-"+id)
	expect(t, first, 200, "")
	again := e.req("POST", "/v1/jobs/"+id+"/complete", e.keyA, body, "Idempotency-Key", "done-"+id)
	if again.status != 200 || again.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(again.body, first.body) {
		t.Fatalf("retry of the complete (%d bytes answered) with its key: %d, replayed %q, %d bytes: %s", len(first.body),
			again.status, again.header.Get("Idempotent-Replayed"), len(again.body), again.body[:min(len(again.body), 300)])
	}
}

// enqueueBig enqueues a job of queue "big" in tenant "a" with args and
// metadata through the library (the HTTP enqueue's body limit would refuse
// both at their largest).
func enqueueBig(t *testing.T, e *env, args, meta []byte) {
	t.Helper()
	_, err := e.client.EnqueueRaw(context.Background(), idem.EnqueueParams{Kind: "pull", Args: args,
		Opts: &idem.EnqueueOpts{Tenant: "a", Queue: "big", Metadata: meta}})
	if err != nil {
		t.Fatal(err)
	}
}

// TestHTMLCharsJobReplyReplayed: a job whose args, metadata and result are
// each as large as allowed and made of '<' completes under an
// Idempotency-Key, and the retry after a lost reply replays that answer.
// The API wrote '<' as \u003c (six bytes for one), so the reply was six
// times the caps the middleware stores a one-job reply up to: it was not
// stored, and the retry ran the complete again and answered 409.
func TestHTMLCharsJobReplyReplayed(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, &setupOpts{serverCfg: &idemhttp.Config{MaxBodyBytes: 2 << 20}})
	html := maxObject("<")
	enqueueBig(t, e, html, html)
	completeReplayed(t, e, "", maxObject("<&>"))
}

// TestControlCharErrorJobReplyReplayed: the last error of a job (64 KiB,
// as a fail allows, of control characters that JSON writes as six-byte
// \u escapes) counts at its encoded size in the cap of a one-job reply: a
// complete of a job with the largest args, metadata and result whose
// previous attempt failed so was over the cap, not stored, and its retry
// answered 409.
func TestControlCharErrorJobReplyReplayed(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, &setupOpts{serverCfg: &idemhttp.Config{MaxBodyBytes: 2 << 20}})
	plain := maxObject("x")
	enqueueBig(t, e, plain, plain)
	completeReplayed(t, e, strings.Repeat("\x01", idem.MaxErrorBytes), plain)
}
