package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// seed002Email is seed 002's dispatch of a welcome email by user-1 of
// tenant acme, sent without an idempotency key.
const seed002Email = `{"queue":"emails","kind":"send_email","metadata":{"user":"user-1"},` +
	`"args":{"to":"ada@example.com","template":"welcome"}}`

// seed002Key is the key docs/recipes/002-queue-middleware.md prints for it.
const seed002Key = "acme_user-1_send_email_db7fe99dfa486c13"

// apiPost posts body to url with an API key and decodes the JSON answer
// into v; it returns the status and the answer's headers.
func apiPost(t *testing.T, url, apiKey, body string, v any) (int, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Close = true // no idle connection left for goleak
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("POST %s: %d %s: %v", url, res.StatusCode, data, err)
	}
	return res.StatusCode, res.Header
}

// enqueueAnswer is the part of a POST /v1/jobs answer the test reads.
type enqueueAnswer struct {
	Job struct {
		ID             string `json:"id"`
		IdempotencyKey string `json:"idempotency_key"`
	} `json:"job"`
	Existing bool `json:"existing"`
}

// TestServeAutoKeySeed002: with [auto_key_by_queue.emails] action =
// "send_email", a real `idem serve` on SQLite gives every job of the queue
// enqueued over HTTP without a key seed 002's key, derived from the
// tenant of the API key (acme), the metadata's user and the args — the
// key the recipe prints and `idem key` prints. Dispatched twice, the job
// exists once: the second answer is 200 with existing true and the same
// job, in POST /v1/jobs and in POST /v1/jobs/batch; a key the client sends
// still wins.
func TestServeAutoKeySeed002(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "idem.db")
	conf := writeConfig(t, "[auto_key_by_queue.emails]\naction = \"send_email\"\n")
	url, _, kill := serveOn(t, db, envConfig+"="+conf)
	defer kill()
	out, errs, code := runCLI(t, "", "apikey", "create", "--database", db, "--tenant", "acme")
	_, acme, found := strings.Cut(out, "key:    ")
	if code != ExitOK || !found {
		t.Fatalf("apikey create: %d %q %q", code, out, errs)
	}
	acme, _, _ = strings.Cut(acme, "\n")

	var first, again enqueueAnswer
	if status, _ := apiPost(t, url+"/v1/jobs", acme, seed002Email, &first); status != http.StatusCreated || first.Existing {
		t.Fatalf("first dispatch: %d %+v, want 201 created", status, first)
	}
	if first.Job.IdempotencyKey != seed002Key {
		t.Fatalf("derived key %q, want the recipe's %q", first.Job.IdempotencyKey, seed002Key)
	}
	status, h := apiPost(t, url+"/v1/jobs", acme, seed002Email, &again)
	if status != http.StatusOK || !again.Existing || again.Job.ID != first.Job.ID || h.Get(headerReplayed) != "true" {
		t.Fatalf("second dispatch: %d %+v (%s %q), want 200 existing job %s", status, again, headerReplayed, h.Get(headerReplayed), first.Job.ID)
	}

	args := `{"to":"ada@example.com","template":"welcome"}`
	keyOut, keyErr, code := runCLI(t, args, "key", "--tenant", "acme", "--user", "user-1", "--action", "send_email")
	if code != ExitOK || !strings.Contains(keyOut, "scoped     "+seed002Key+"\n") {
		t.Fatalf("idem key: %d %q %q, want scoped %s", code, keyOut, keyErr, seed002Key)
	}

	var batch struct {
		Results []enqueueAnswer `json:"results"`
	}
	other := strings.Replace(seed002Email, "user-1", "user-2", 1)
	if status, _ := apiPost(t, url+"/v1/jobs/batch", acme, `{"jobs":[`+seed002Email+`,`+other+`]}`, &batch); status != http.StatusOK ||
		len(batch.Results) != 2 {
		t.Fatalf("batch: %d %+v", status, batch)
	}
	if r := batch.Results[0]; !r.Existing || r.Job.ID != first.Job.ID {
		t.Errorf("batch, the same dispatch: %+v, want existing job %s", r, first.Job.ID)
	}
	// The same args: the same hash, another user part.
	if r := batch.Results[1]; r.Existing || r.Job.IdempotencyKey != "acme_user-2_send_email_"+seed002Key[len(seed002Key)-16:] {
		t.Errorf("batch, another user: %+v, want a new job keyed for user-2", r)
	}

	explicit := strings.Replace(seed002Email, `{"queue"`, `{"idempotency_key":"welcome-ada","queue"`, 1)
	var own enqueueAnswer
	if status, _ := apiPost(t, url+"/v1/jobs", acme, explicit, &own); status != http.StatusCreated || own.Job.IdempotencyKey != "welcome-ada" {
		t.Fatalf("explicit key: %d %+v, want 201 with key welcome-ada", status, own)
	}

	var list struct {
		Jobs []json.RawMessage `json:"jobs"`
	}
	listOut, listErr, code := runCLI(t, "", "jobs", "list", "--queue", "emails", "--json", "--url", url, "--api-key", acme)
	if code != ExitOK || json.Unmarshal([]byte(listOut), &list) != nil || len(list.Jobs) != 3 {
		t.Fatalf("jobs list: %d %q %q, want 3 jobs (user-1's once, user-2's, the explicit key's)", code, listOut, listErr)
	}
}

// headerReplayed is the header of an answer that returned an existing job.
const headerReplayed = "Idempotent-Replayed"
