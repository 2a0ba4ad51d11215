package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/deliver"
	"github.com/idem-dev/idem/internal/executor"
	"github.com/idem-dev/idem/webhook"
)

// deliveryBundle is an executor whose jobs without a handler go to a real
// webhook target (a deliver.Webhook through a webhook.Sender) served by a
// real HTTP server on 127.0.0.1.
type deliveryBundle struct {
	*bundle
	exec *executor.Executor
}

func setupDelivery(t *testing.T, receiver http.Handler, senderCfg *webhook.Config,
	target func(url string) (deliver.Target, string, error)) *deliveryBundle {
	t.Helper()
	b := setup(t)
	srv := httptest.NewServer(receiver)
	t.Cleanup(srv.Close)
	sender, err := webhook.NewSender(senderCfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sender.Close)
	if target == nil {
		target = func(url string) (deliver.Target, string, error) {
			w, err := deliver.NewWebhook(sender, &deliver.WebhookConfig{URL: url})
			return w, "receiver", err
		}
	}
	exec, err := executor.New(&executor.Config{
		Store: b.store, Now: func() time.Time { return now }, LeaseDuration: time.Minute,
		ResultTTL:  func(string) time.Duration { return time.Hour },
		RetryDelay: func(row *idemtype.JobRow) time.Duration { return time.Duration(row.Attempt) * time.Second },
		Handler:    func(kind string) executor.Handler { return b.handlers[kind] },
		Target: func(_ context.Context, row *idemtype.JobRow) (deliver.Target, string, error) {
			return target(srv.URL + "/" + row.Kind)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &deliveryBundle{bundle: b, exec: exec}
}

// answers replies to /<kind> with the status, headers and body of that kind.
type answer struct {
	status int
	header map[string]string
	body   string
}

func answers(m map[string]answer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, ok := m[strings.TrimPrefix(r.URL.Path, "/")]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		for k, v := range a.header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(a.status)
		_, _ = w.Write([]byte(a.body))
	})
}

func TestDeliveryOutcomes(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 600) // 1,200 bytes, two per rune
	b := setupDelivery(t, answers(map[string]answer{
		"json":     {200, map[string]string{"Content-Type": "application/json"}, `{"received":true}`},
		"text":     {202, nil, "queued"},
		"empty":    {204, nil, ""},
		"busy":     {503, map[string]string{"Retry-After": "120"}, "try later"},
		"flaky":    {500, nil, ""},
		"soon":     {429, map[string]string{"Retry-After": "0"}, ""},
		"gone":     {410, nil, "no such hook"},
		"bad":      {400, nil, long},
		"redirect": {302, map[string]string{"Location": "/json"}, ""},
	}), &webhook.Config{}, nil)
	ctx := context.Background()
	for _, tc := range []struct {
		kind   string
		state  idemtype.JobState
		status int
		result string
		runAt  time.Time
		errHas []string
	}{
		{kind: "json", state: idemtype.StateCompleted, status: 200, result: `{"received":true}`},
		{kind: "text", state: idemtype.StateCompleted, status: 202, result: `"queued"`},
		{kind: "empty", state: idemtype.StateCompleted, status: 204},
		// The target's Retry-After wins over a shorter backoff (1s here).
		{kind: "busy", state: idemtype.StateRetryable, status: 503, runAt: now.Add(120 * time.Second),
			errHas: []string{"503", `response: "try later"`}},
		{kind: "flaky", state: idemtype.StateRetryable, status: 500, runAt: now.Add(time.Second), errHas: []string{"500"}},
		// A Retry-After shorter than the backoff does not shorten it.
		{kind: "soon", state: idemtype.StateRetryable, status: 429, runAt: now.Add(time.Second), errHas: []string{"429"}},
		{kind: "gone", state: idemtype.StateDead, status: 410, errHas: []string{"410", "no such hook"}},
		{kind: "bad", state: idemtype.StateDead, status: 400, errHas: []string{"400", "…"}},
		{kind: "redirect", state: idemtype.StateDead, status: 302, errHas: []string{"302"}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			fin := b.exec.Execute(ctx, b.claim(t, tc.kind, ""), nil)
			if fin.State != tc.state || fin.Target != "receiver" || fin.HTTPStatus != tc.status {
				t.Fatalf("state %s target %q status %d, want %s receiver %d (error %q)", fin.State, fin.Target, fin.HTTPStatus,
					tc.state, tc.status, fin.Error)
			}
			if string(fin.Result) != tc.result && !(tc.result == "" && (fin.Result == nil || string(fin.Result) == "null")) {
				t.Errorf("result %q, want %q", fin.Result, tc.result)
			}
			if !tc.runAt.IsZero() && !fin.RunAt.Equal(tc.runAt) {
				t.Errorf("run at %v, want %v", fin.RunAt, tc.runAt)
			}
			for _, s := range tc.errHas {
				if !strings.Contains(fin.Error, s) {
					t.Errorf("error %q lacks %q", fin.Error, s)
				}
			}
			if !utf8.ValidString(fin.Error) {
				t.Errorf("error is not valid UTF-8: %q", fin.Error)
			}
			if len(fin.Error) > executor.MaxErrorExcerpt+200 {
				t.Errorf("error of %d bytes: the response excerpt is not bounded", len(fin.Error))
			}
			b.finish(t, fin)
		})
	}
}

func TestDeliveryWithoutTarget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("no target matches", func(t *testing.T) {
		t.Parallel()
		b := setupDelivery(t, answers(nil), &webhook.Config{}, func(string) (deliver.Target, string, error) { return nil, "", nil })
		fin := b.exec.Execute(ctx, b.claim(t, "orphan", ""), nil)
		// Retryable, so a target added later takes the job.
		if fin.State != idemtype.StateRetryable || !strings.Contains(fin.Error, executor.ErrNoTarget.Error()) ||
			!strings.Contains(fin.Error, `kind "orphan"`) || fin.Target != "" {
			t.Fatalf("state %s error %q target %q", fin.State, fin.Error, fin.Target)
		}
	})
	t.Run("looking up the target fails", func(t *testing.T) {
		t.Parallel()
		b := setupDelivery(t, answers(nil), &webhook.Config{}, func(string) (deliver.Target, string, error) {
			return nil, "", errors.New("targets table unreadable")
		})
		fin := b.exec.Execute(ctx, b.claim(t, "k", ""), nil)
		if fin.State != idemtype.StateRetryable || !strings.Contains(fin.Error, "targets table unreadable") {
			t.Fatalf("state %s error %q", fin.State, fin.Error)
		}
	})
	t.Run("a handler wins over a target", func(t *testing.T) {
		t.Parallel()
		b := setupDelivery(t, answers(map[string]answer{"k": {500, nil, ""}}), &webhook.Config{}, nil)
		b.handlers["k"] = func(context.Context, *idemtype.JobRow) (json.RawMessage, error) {
			return json.RawMessage(`"handled"`), nil
		}
		fin := b.exec.Execute(ctx, b.claim(t, "k", ""), nil)
		if fin.State != idemtype.StateCompleted || string(fin.Result) != `"handled"` || fin.Target != "" {
			t.Fatalf("state %s result %s target %q", fin.State, fin.Result, fin.Target)
		}
	})
}

// TestDeliveryToABusyTarget: when the target's slots are full the job
// snoozes (no attempt used, no target or status recorded) instead of
// holding a worker.
func TestDeliveryToABusyTarget(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{})
	release := make(chan struct{})
	receiver := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(arrived)
			<-release
		}
		w.WriteHeader(200)
	})
	b := setupDelivery(t, receiver, &webhook.Config{MaxPerTarget: 1, SlotWait: -1}, nil)
	ctx := context.Background()
	slow := b.claim(t, "slow", "")
	done := make(chan idemtype.JobState, 1)
	go func() { done <- b.exec.Execute(ctx, slow, nil).State }()
	<-arrived // the one slot of the target is taken

	fin := b.exec.Execute(ctx, b.claim(t, "fast", ""), nil)
	close(release)
	if fin.State != idemtype.StateScheduled || !fin.Snooze || !fin.RunAt.Equal(now.Add(executor.BusyWait)) {
		t.Fatalf("busy target: state %s snooze %v run at %v", fin.State, fin.Snooze, fin.RunAt)
	}
	if fin.Target != "" || fin.HTTPStatus != 0 {
		t.Errorf("a push that was not sent is logged as target %q status %d", fin.Target, fin.HTTPStatus)
	}
	if st := <-done; st != idemtype.StateCompleted {
		t.Fatalf("the slow push: %s", st)
	}
}

func TestResultJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{`{"a":1}`, `{"a":1}`},
		{`[1,2]`, `[1,2]`},
		{`42`, `42`},
		{`ok`, `"ok"`},
		{`{"a":`, `"{\"a\":"`},
		{"line\nbreak", `"line\nbreak"`},
	} {
		got := executor.ResultJSON([]byte(tc.in))
		if string(got) != tc.want {
			t.Errorf("ResultJSON(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got != nil && !json.Valid(got) {
			t.Errorf("ResultJSON(%q) is not JSON", tc.in)
		}
	}
}

// TestDeliveryTruncatedResult: a 2xx answer longer than the sender's
// MaxBodyBytes completes its job with a result that says it was cut: a
// JSON string of the text read (cut on a rune boundary) ending in
// " …[cut: more than N bytes]". Before the fix the cut text was stored
// unmarked: as a JSON string when it no longer parsed, as a different
// value when it still did (the number 12345678901 for 123456789012345), a
// cut rune turned into U+FFFD. Bytes that are not UTF-8 before the cut
// become U+FFFD, as in a whole answer; one of exactly N bytes is whole.
func TestDeliveryTruncatedResult(t *testing.T) {
	t.Parallel()
	b := setupDelivery(t, answers(map[string]answer{
		"number": {200, nil, "123456789012345"},
		"json":   {200, map[string]string{"Content-Type": "application/json"}, `{"items":[1,2,3]}`},
		"runes":  {200, nil, strings.Repeat("é", 8)},
		"exact":  {200, nil, "abcdefghijk"},
		"latin1": {200, nil, "caf\xe9 au lait"},
	}), &webhook.Config{MaxBodyBytes: 11}, nil)
	ctx := context.Background()
	for kind, want := range map[string]string{
		"number": `"12345678901 …[cut: more than 11 bytes]"`,
		"json":   `"{\"items\":[1 …[cut: more than 11 bytes]"`,
		"runes":  `"ééééé …[cut: more than 11 bytes]"`,
		"exact":  `"abcdefghijk"`,
		"latin1": "\"caf\ufffd au lai …[cut: more than 11 bytes]\"",
	} {
		fin := b.exec.Execute(ctx, b.claim(t, kind, ""), nil)
		if fin.State != idemtype.StateCompleted || string(fin.Result) != want {
			t.Errorf("%s: state %s result %s, want completed with %s", kind, fin.State, fin.Result, want)
		}
		b.finish(t, fin)
	}
}
