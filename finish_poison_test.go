package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

// poisonJobs is how many jobs finish together in TestFinishPoisonedBatch.
const poisonJobs = 24

// testFinishPoisonedBatch: jobs whose handlers return at the same moment
// are finished in one batch; one returns a result that is not UTF-8 (a
// json.RawMessage of Latin-1 bytes), one an error whose text holds a NUL
// byte, one a result that is not JSON. PostgreSQL refused the whole batch,
// so every job of it was rescued and ran again. Now each of the others
// completes after exactly one call, and the bad ones end as documented:
// the bad bytes of a result or error text become U+FFFD (completed, and
// dead for the failure of a one-attempt job), a result that is not JSON is
// a permanent failure (dead).
func testFinishPoisonedBatch(t *testing.T, b *bundle) {
	ctx := context.Background()
	var (
		mu    sync.Mutex
		calls = map[string]int{}
		all   = make(chan struct{})
		once  sync.Once
	)
	started := 0
	b.workers.Handle("poison", func(ctx context.Context, job *idem.JobRow) (json.RawMessage, error) {
		var args struct{ Mode string }
		if err := json.Unmarshal(job.Args, &args); err != nil {
			return nil, err
		}
		mu.Lock()
		calls[args.Mode]++
		started++
		if started == poisonJobs {
			once.Do(func() { close(all) })
		}
		mu.Unlock()
		select { // return together, so the finishes share a batch
		case <-all:
		case <-ctx.Done():
		}
		switch {
		case args.Mode == "utf8":
			return json.RawMessage("{\"name\":\"caf\xe9\"}"), nil
		case args.Mode == "nul":
			return nil, errors.New("boom\x00after")
		case args.Mode == "notjson":
			return json.RawMessage(`{"a":`), nil
		}
		return json.RawMessage(`{"ok":true}`), nil
	})
	ids := map[string]int64{}
	for i := range poisonJobs {
		mode := fmt.Sprintf("ok-%d", i)
		switch i {
		case 5:
			mode = "utf8"
		case 11:
			mode = "nul"
		case 17:
			mode = "notjson"
		}
		opts := &idem.EnqueueOpts{IdempotencyKey: "poison-" + mode}
		if mode == "nul" {
			opts.MaxAttempts = 1
		}
		res, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "poison",
			Args: json.RawMessage(fmt.Sprintf(`{"mode":%q}`, mode)), Opts: opts})
		if err != nil {
			t.Fatal(err)
		}
		ids[mode] = res.Job.ID
	}
	b.start(t)
	rows := map[string]*idem.JobRow{}
	for mode, id := range ids {
		want := idem.StateCompleted
		if mode == "nul" || mode == "notjson" {
			want = idem.StateDead
		}
		rows[mode] = waitState(t, b, id, want)
	}
	mu.Lock()
	defer mu.Unlock()
	for mode, n := range calls {
		if n != 1 {
			t.Errorf("job %s ran %d times, want once", mode, n)
		}
	}
	for mode, row := range rows {
		if row.Attempt != 1 {
			t.Errorf("job %s: attempt %d, want 1", mode, row.Attempt)
		}
	}
	if got, want := string(rows["utf8"].Result), "{\"name\":\"caf\ufffd\"}"; got != want {
		t.Errorf("result not UTF-8: stored %q, want %q", got, want)
	}
	if got, want := rows["nul"].LastError, "boom\ufffdafter"; got != want {
		t.Errorf("error with a NUL byte: last error %q, want %q", got, want)
	}
	if got := rows["notjson"].LastError; !strings.Contains(got, "result is not valid JSON") {
		t.Errorf("result not JSON: last error %q", got)
	}
	// The cached result of the keyed job is the stored one.
	res, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "poison", Args: json.RawMessage(`{"mode":"utf8"}`),
		Opts: &idem.EnqueueOpts{IdempotencyKey: "poison-utf8"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Job.ID != ids["utf8"] {
		t.Errorf("repeat enqueue made job %d, want the existing %d", res.Job.ID, ids["utf8"])
	}
}

func TestFinishPoisonedBatch(t *testing.T) {
	t.Parallel()
	cfg := &idem.Config{Queues: queues(poisonJobs), MaxAttempts: 3, LeaseDuration: time.Second,
		RescueInterval: 50 * time.Millisecond, PollInterval: 20 * time.Millisecond,
		Retry: idem.RetryPolicy{Delays: []time.Duration{10 * time.Millisecond}, Jitter: -1}}
	bothBundles(t, func() *idem.Config { return cfg }, testFinishPoisonedBatch)
}
