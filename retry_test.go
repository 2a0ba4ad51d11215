package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

func TestRetryPolicyDelay(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		p       idem.RetryPolicy
		attempt int
		rnd     float64
		want    time.Duration
	}{
		{"defaults, first attempt, no jitter drawn", idem.RetryPolicy{Jitter: -1}, 1, 0.5, 5 * time.Second},
		{"defaults double", idem.RetryPolicy{Jitter: -1}, 4, 0.5, 40 * time.Second},
		{"capped at the default hour", idem.RetryPolicy{Jitter: -1}, 20, 0.5, time.Hour},
		{"attempt 0 counts as the first", idem.RetryPolicy{Jitter: -1}, 0, 0.5, 5 * time.Second},
		{"seed 004: 1s, 5s, 25s", idem.RetryPolicy{Base: time.Second, Factor: 5, Jitter: -1}, 3, 0.5, 25 * time.Second},
		{"factor 1 is constant", idem.RetryPolicy{Base: 7 * time.Second, Factor: 1, Jitter: -1}, 9, 0.5, 7 * time.Second},
		{"own cap", idem.RetryPolicy{Base: time.Minute, Max: 90 * time.Second, Jitter: -1}, 3, 0.5, 90 * time.Second},
		{"default jitter, lowest draw", idem.RetryPolicy{}, 1, 0, 4500 * time.Millisecond},
		{"default jitter, middle draw", idem.RetryPolicy{}, 1, 0.5, 5 * time.Second},
		{"jitter 0.5, highest draw", idem.RetryPolicy{Jitter: 0.5}, 1, 1, 7500 * time.Millisecond},
		{"jitter never passes the cap", idem.RetryPolicy{Base: time.Hour, Jitter: 0.5}, 1, 1, time.Hour},
		{"explicit delays", idem.RetryPolicy{Delays: []time.Duration{time.Second, 10 * time.Second}, Jitter: -1}, 2, 0.5, 10 * time.Second},
		{"the last delay repeats", idem.RetryPolicy{Delays: []time.Duration{time.Second, 10 * time.Second}, Jitter: -1}, 7, 0.5, 10 * time.Second},
		{"explicit delays are not capped", idem.RetryPolicy{Delays: []time.Duration{3 * time.Hour}, Jitter: -1}, 1, 0.5, 3 * time.Hour},
		{"a zero delay retries at once", idem.RetryPolicy{Delays: []time.Duration{0}}, 1, 0.9, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.Delay(tc.attempt, tc.rnd); got != tc.want {
				t.Errorf("Delay(%d, %v) = %v, want %v", tc.attempt, tc.rnd, got, tc.want)
			}
		})
	}
}

// TestRetryPolicyJitterBounds: whatever the draw, a delay stays within
// ±Jitter of the policy's delay and never goes negative or past Max.
func TestRetryPolicyJitterBounds(t *testing.T) {
	t.Parallel()
	p := idem.RetryPolicy{Base: 10 * time.Second, Factor: 3, Max: 5 * time.Minute, Jitter: 0.25}
	for attempt := 1; attempt <= 8; attempt++ {
		mid := p.Delay(attempt, 0.5)
		for i := range 101 {
			d := p.Delay(attempt, float64(i)/100)
			lo, hi := time.Duration(float64(mid)*0.75), min(time.Duration(float64(mid)*1.25), p.Max)
			if d < lo-time.Nanosecond || d > hi+time.Nanosecond || d < 0 {
				t.Fatalf("attempt %d draw %d: %v outside [%v, %v]", attempt, i, d, lo, hi)
			}
		}
	}
}

// TestRetryPolicyHugeDelayNeverNegative: an explicit delay near the largest
// time.Duration plus jitter overflowed the float → Duration conversion to
// −292 years for half the draws (the job retried at once instead of never).
func TestRetryPolicyHugeDelayNeverNegative(t *testing.T) {
	t.Parallel()
	for _, p := range []idem.RetryPolicy{
		{Delays: []time.Duration{2562047 * time.Hour}},
		{Delays: []time.Duration{time.Duration(math.MaxInt64)}, Jitter: 0.5},
	} {
		for _, rnd := range []float64{0, 0.5, 0.6, 0.99} {
			if d := p.Delay(1, rnd); d < time.Duration(float64(p.Delays[0])*0.5) {
				t.Errorf("%v with draw %v: delay %v", p.Delays, rnd, d)
			}
		}
	}
}

func TestRetryPolicyJSON(t *testing.T) {
	t.Parallel()
	in := idem.RetryPolicy{Base: 2 * time.Second, Factor: 3, Max: 10 * time.Minute, Jitter: 0.2,
		Delays: []time.Duration{time.Second, 90 * time.Second}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"base":"2s","factor":3,"max":"10m0s","jitter":0.2,"delays":["1s","1m30s"]}` {
		t.Errorf("encoded %s", b)
	}
	var out idem.RetryPolicy
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(out) != fmt.Sprint(in) {
		t.Errorf("round trip %+v, want %+v", out, in)
	}
	if b, _ := json.Marshal(idem.RetryPolicy{}); string(b) != `{}` {
		t.Errorf("zero policy encodes as %s, want {}", b)
	}
	for _, bad := range []string{`{"base":"soon"}`, `{"max":"1 hour"}`, `{"delays":["1s","x"]}`, `{"factor":"fast"}`, `[]`} {
		if err := json.Unmarshal([]byte(bad), &out); err == nil {
			t.Errorf("%s decoded", bad)
		}
	}
}

// A retry policy turns the failed attempt's number into the wait before
// the next one. Jitter spreads the retries of many jobs; -1 turns it off.
func ExampleRetryPolicy_Delay() {
	p := idem.RetryPolicy{Base: time.Second, Factor: 5, Max: time.Minute, Jitter: -1}
	for attempt := 1; attempt <= 4; attempt++ {
		fmt.Println(attempt, p.Delay(attempt, 0))
	}
	// Output:
	// 1 1s
	// 2 5s
	// 3 25s
	// 4 1m0s
}

// TestDefaultRetryIsSeed003: with no retry settings a job follows seed
// 003's policy: 5 attempts with waits of 5, 10, 20 and 40 s (±10 % jitter)
// between them, then dead; the policy's fifth wait is 80 s.
func TestDefaultRetryIsSeed003(t *testing.T) {
	t.Parallel()
	seed := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second}
	for i, want := range seed {
		if got := (idem.RetryPolicy{}).Delay(i+1, 0.5); got != want {
			t.Errorf("default delay after attempt %d = %v, want %v", i+1, got, want)
		}
	}
	ctx := context.Background()
	clk := &fakeClock{now: time.Date(2025, 11, 14, 9, 0, 0, 0, time.UTC)}
	b := setup(t, &idem.Config{Now: clk.Now, DisableMaintenance: true})
	res, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "geo_event", Opts: &idem.EnqueueOpts{Queue: "geo"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Job.MaxAttempts != 5 {
		t.Fatalf("max attempts %d, want seed 003's 5", res.Job.MaxAttempts)
	}
	for attempt := 1; attempt <= 5; attempt++ {
		jobs, err := b.client.Claim(ctx, idem.ClaimParams{Queues: []string{"geo"}, WorkerID: "w", Limit: 1})
		if err != nil || len(jobs) != 1 {
			t.Fatalf("attempt %d: claimed %d jobs (%v)", attempt, len(jobs), err)
		}
		row, err := b.client.Fail(ctx, "", jobs[0].ID, jobs[0].LeaseToken, idem.FailParams{Error: "push target down"})
		if err != nil {
			t.Fatal(err)
		}
		if attempt == 5 {
			if row.State != idem.StateDead {
				t.Fatalf("after attempt 5: %s, want dead", row.State)
			}
			return
		}
		wait, want := row.RunAt.Sub(clk.Now()), seed[attempt-1]
		if row.State != idem.StateRetryable || wait < want*9/10 || wait > want*11/10 {
			t.Fatalf("after attempt %d: %s, next try in %v, want retryable in %v ±10 %%", attempt, row.State, wait, want)
		}
		clk.Add(wait)
	}
}

// TestRetryPolicyNotFiniteRefused: a retry policy whose factor or jitter
// is NaN or infinite cannot be stored (JSON has no such numbers) nor
// computed: a job's, a schedule's and the configuration's are refused
// naming retry, instead of the job silently getting the default policy
// or the schedule failing to encode. So is a factor between 0 and 1
// (0 is the default): it became the default factor 2 silently, where
// HTTP refuses it.
func TestRetryPolicyNotFiniteRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, &idem.Config{DisableMaintenance: true})
	for _, p := range []idem.RetryPolicy{{Factor: math.NaN()}, {Factor: math.Inf(1)}, {Jitter: math.NaN()}, {Jitter: math.Inf(-1)},
		{Factor: 0.5}, {Factor: math.SmallestNonzeroFloat64}} {
		t.Run(fmt.Sprintf("factor %v jitter %v", p.Factor, p.Jitter), func(t *testing.T) {
			var inv *idem.InvalidError
			_, err := b.client.EnqueueRaw(t.Context(), idem.EnqueueParams{Kind: "k", Opts: &idem.EnqueueOpts{Retry: &p}})
			if !errors.As(err, &inv) || inv.Field != "retry" {
				t.Errorf("enqueue: %v, want an InvalidError naming retry", err)
			}
			_, err = b.client.SchedulePut(t.Context(), &idem.Schedule{Name: "s", Every: time.Hour, Kind: "k", Retry: &p})
			if !errors.As(err, &inv) || inv.Field != "retry" {
				t.Errorf("schedule: %v, want an InvalidError naming retry", err)
			}
			if _, err := idem.NewClient(b.store, &idem.Config{Retry: p}); err == nil {
				t.Error("NewClient took the policy as Config.Retry")
			}
		})
	}
}
