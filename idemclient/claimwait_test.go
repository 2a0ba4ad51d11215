package idemclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemclient"
	"github.com/idem-dev/idem/internal/windowtest"
)

// claimWaits records the wait of every claim request through it, on its
// arrival, and closes done once the arrive-th claim has arrived (arrive >
// 0) or the answer-th claim has been answered (answer > 0).
type claimWaits struct {
	mu             sync.Mutex
	waits          []string
	answered       int
	arrive, answer int
	done           chan struct{}
	once           sync.Once
}

func newClaimWaits(arrive, answer int) *claimWaits {
	return &claimWaits{arrive: arrive, answer: answer, done: make(chan struct{})}
}

func (c *claimWaits) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/claim" {
			next.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var req struct {
			Wait string `json:"wait"`
		}
		_ = json.Unmarshal(body, &req)
		c.mu.Lock()
		c.waits = append(c.waits, req.Wait)
		arrived := len(c.waits)
		c.mu.Unlock()
		if arrived == c.arrive {
			c.once.Do(func() { close(c.done) })
		}
		next.ServeHTTP(w, r)
		c.mu.Lock()
		c.answered++
		answered := c.answered
		c.mu.Unlock()
		if answered == c.answer {
			c.once.Do(func() { close(c.done) })
		}
	})
}

func (c *claimWaits) seen() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.waits...)
}

// TestClaimWaitPollsAgain: a ClaimWait whose first long poll comes back
// empty polls again with the same wait, and returns the job enqueued
// meanwhile.
func TestClaimWaitPollsAgain(t *testing.T) {
	t.Parallel()
	waits := newClaimWaits(0, 1)
	cl, _ := setup(t, waits.wrap)
	got := make(chan []*idemclient.Job, 1)
	errs := make(chan error, 1)
	go func() {
		jobs, err := cl.ClaimWait(t.Context(), &idemclient.ClaimRequest{Queues: []string{"cw"}, WorkerID: "w", Wait: time.Second})
		got <- jobs
		errs <- err
	}()
	<-waits.done // the first poll answered empty
	res, err := cl.Enqueue(t.Context(), &idemclient.EnqueueRequest{Queue: "cw", Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	jobs := <-got
	if err := <-errs; err != nil || len(jobs) != 1 || jobs[0].ID != res.Job.ID || jobs[0].LeaseToken == "" {
		t.Fatalf("ClaimWait: %+v %v, want job %s", jobs, err, res.Job.ID)
	}
	if w := waits.seen(); len(w) < 2 || w[0] != "1s" || w[1] != "1s" {
		t.Fatalf("waits %q, want 1s each time", w)
	}
}

// TestClaimWaitEndsWithItsContext: with nothing to claim, ClaimWait returns
// its context's error and no jobs.
func TestClaimWaitEndsWithItsContext(t *testing.T) {
	t.Parallel()
	waits := newClaimWaits(1, 0)
	cl, _ := setup(t, waits.wrap)
	ctx, cancel := context.WithCancel(t.Context())
	go func() { <-waits.done; cancel() }()
	jobs, err := cl.ClaimWait(ctx, &idemclient.ClaimRequest{Queues: []string{"empty"}, WorkerID: "w", Wait: time.Second})
	if !errors.Is(err, context.Canceled) || jobs != nil {
		t.Fatalf("ClaimWait: %v %v, want context.Canceled", jobs, err)
	}
}

// TestClaimDetailThrottled: once a rate limit is spent, a claim reports it
// throttled with when the budget returns (the end of its window), and
// ClaimWait's next poll waits that long, capped at the server's 60s.
func TestClaimDetailThrottled(t *testing.T) {
	t.Parallel()
	waits := newClaimWaits(4, 0)
	cl, _ := setup(t, waits.wrap)
	ctx := t.Context()
	// A window of an hour or a little more that does not end in the next
	// five minutes: one ending between the two claims would let the second
	// job through.
	period := windowtest.Period(time.Now(), time.Hour, 5*time.Minute)
	if _, err := cl.LimitPut(ctx, idemclient.LimitScope{Queue: "rl"}, idemclient.LimitRequest{Rate: ptr(idem.FormatRate(1, period))}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := cl.Enqueue(ctx, &idemclient.EnqueueRequest{Queue: "rl", Kind: "k"}); err != nil {
			t.Fatal(err)
		}
	}
	req := &idemclient.ClaimRequest{Queues: []string{"rl"}, WorkerID: "w", Limit: 10}
	first, err := cl.ClaimDetail(ctx, req)
	if err != nil || len(first.Jobs) != 1 || first.Throttled {
		t.Fatalf("first claim: %+v %v, want one job", first, err)
	}
	before := time.Now()
	second, err := cl.ClaimDetail(ctx, req)
	after := time.Now()
	if err != nil || len(second.Jobs) != 0 || !second.Throttled {
		t.Fatalf("second claim: %+v %v, want throttled", second, err)
	}
	// Rate windows are aligned to their period since the epoch: the budget
	// returns at the window's end.
	at := second.NextAvailableAt
	if want := windowtest.End(before, period); !at.Equal(want) {
		t.Fatalf("next available at %v, want the window's end %v", at, want)
	}
	if ra := second.RetryAfter; ra < at.Sub(after)-time.Second || ra > at.Sub(before)+time.Second {
		t.Fatalf("retry after %v, want about %v", ra, at.Sub(before))
	}
	// ClaimWait: its first poll is throttled, so the next waits the cap
	// (cancelled once it has arrived).
	wctx, cancel := context.WithCancel(ctx)
	go func() { <-waits.done; cancel() }()
	jobs, err := cl.ClaimWait(wctx, &idemclient.ClaimRequest{Queues: []string{"rl"}, WorkerID: "w", Wait: time.Second})
	if !errors.Is(err, context.Canceled) || jobs != nil {
		t.Fatalf("ClaimWait on a spent limit: %v %v", jobs, err)
	}
	end := time.Now()
	w := waits.seen()
	if len(w) < 4 || w[2] != "1s" {
		t.Fatalf("waits %q, want the throttled poll followed by a longer one", w)
	}
	// The longer wait is the time left until the budget returns, capped at
	// 60s (the window has five minutes left at least: the cap).
	capped := func(d time.Duration) time.Duration { return min(d, time.Minute) }
	got, err := time.ParseDuration(w[3])
	if err != nil || got < capped(at.Sub(end))-time.Second || got > capped(at.Sub(after))+time.Second {
		t.Fatalf("waits %q, want the throttled poll followed by one of about %v", w, capped(at.Sub(after)))
	}
}

// TestFilterJSON: a Filter renders in the API's form: states as "state",
// times as RFC 3339 with their offset, zero values left out.
func TestFilterJSON(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 26, 10, 30, 0, 5000, time.FixedZone("x", 3600))
	cases := []struct {
		name string
		f    idemclient.Filter
		want string
	}{
		{"empty", idemclient.Filter{}, `{}`},
		{"states and queue", idemclient.Filter{States: []string{"dead", "failed"}, Queue: "q"}, `{"state":["dead","failed"],"queue":"q"}`},
		{"times", idemclient.Filter{Since: at, Until: at.Add(time.Hour)},
			`{"since":"2026-11-26T10:30:00.000005+01:00","until":"2026-11-26T11:30:00.000005+01:00"}`},
		{"resolved false is kept", idemclient.Filter{Resolved: ptr(false), ErrorCode: "E"}, `{"error_code":"E","resolved":false}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := json.Marshal(c.f)
			if err != nil || string(b) != c.want {
				t.Fatalf("%s %v, want %s", b, err, c.want)
			}
		})
	}
}
