package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

func uploadJobs(files ...string) []idem.EnqueueParams {
	out := make([]idem.EnqueueParams, len(files))
	for i, f := range files {
		args, _ := json.Marshal(map[string]string{"file": f})
		out[i] = idem.EnqueueParams{Kind: "upload", Args: args}
	}
	return out
}

func TestBatchCreateOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	first, err := b.client.BatchCreate(ctx, idem.BatchCreateParams{Key: "upload-42", Metadata: json.RawMessage(`{"user":"u1"}`),
		Jobs: uploadJobs("a.csv", "b.csv", "c.csv")})
	if err != nil {
		t.Fatal(err)
	}
	if first.Existing || first.Total != 3 || first.Counts[idem.StateAvailable] != 3 || first.Finished {
		t.Fatalf("first: %+v", first)
	}
	t.Run("double click returns the batch", func(t *testing.T) {
		again, err := b.client.BatchCreate(ctx, idem.BatchCreateParams{Key: "upload-42", Jobs: uploadJobs("c.csv", "a.csv", "b.csv")})
		if err != nil {
			t.Fatal(err)
		}
		if !again.Existing || again.ID != first.ID || again.Total != 3 {
			t.Fatalf("repeat: %+v", again)
		}
	})
	t.Run("job keys do not depend on position", func(t *testing.T) {
		k1, _ := idem.BatchJobKey("upload-42", "", "upload", json.RawMessage(`{"file":"a.csv"}`))
		k2, _ := idem.BatchJobKey("upload-42", "", "upload", json.RawMessage(`{ "file" : "a.csv" }`))
		if k1 != k2 || first.Jobs[0].IdempotencyKey != k1 {
			t.Fatalf("keys %q %q, first job %q", k1, k2, first.Jobs[0].IdempotencyKey)
		}
		own, _ := idem.BatchJobKey("upload-42", "row-7", "upload", nil)
		if own != "upload-42/row-7" {
			t.Fatalf("own key: %q", own)
		}
	})
	jobs, _, _ := b.client.JobList(ctx, &idem.JobListParams{})
	if len(jobs) != 3 {
		t.Fatalf("%d jobs, want 3", len(jobs))
	}
	cancelled, err := b.client.BatchCancel(ctx, "", first.ID)
	if err != nil {
		t.Fatal(err)
	}
	if cancelled.Counts[idem.StateCancelled] != 3 || !cancelled.Finished {
		t.Fatalf("after cancel: %+v", cancelled.Counts)
	}
	if _, err := b.client.BatchGet(ctx, "", first.ID+99); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("unknown batch: %v", err)
	}
}

func TestBatchBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	bad := uploadJobs("a.csv", "b.csv")
	bad[1].Opts = &idem.EnqueueOpts{DependsOn: []int64{424242}} // no such job
	if _, err := b.client.BatchCreate(ctx, idem.BatchCreateParams{Key: "retry-me", Jobs: bad}); err == nil {
		t.Fatal("a batch with a missing dependency was created")
	}
	var inv *idemtype.InvalidError
	_, err := b.client.BatchCreate(ctx, idem.BatchCreateParams{Key: "retry-me", Jobs: []idem.EnqueueParams{{Kind: ""}}})
	if !errors.As(err, &inv) || inv.Field != "jobs[0].kind" {
		t.Fatalf("empty kind: %v", err)
	}
	if _, err := b.client.BatchCreate(ctx, idem.BatchCreateParams{Key: "", Jobs: uploadJobs("a")}); !errors.Is(err, idem.ErrInvalid) {
		t.Fatalf("empty key: %v", err)
	}
	if jobs, _, _ := b.client.JobList(ctx, &idem.JobListParams{}); len(jobs) != 0 {
		t.Fatalf("%d jobs written by refused batches", len(jobs))
	}
	// The retry with the fixed list creates the batch.
	ok, err := b.client.BatchCreate(ctx, idem.BatchCreateParams{Key: "retry-me", Jobs: uploadJobs("a.csv", "b.csv")})
	if err != nil || ok.Existing || ok.Total != 2 {
		t.Fatalf("retry: %+v %v", ok, err)
	}
}

func TestBatchCreateRace(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	var created atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := b.client.BatchCreate(ctx, idem.BatchCreateParams{Key: "clicks", Jobs: uploadJobs("a", "b", "c", "d")})
			if err != nil {
				t.Error(err)
				return
			}
			if !r.Existing {
				created.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := created.Load(); n != 1 {
		t.Fatalf("%d creators created the batch, want 1", n)
	}
	if jobs, _, _ := b.client.JobList(ctx, &idem.JobListParams{}); len(jobs) != 4 {
		t.Fatalf("%d jobs, want 4", len(jobs))
	}
}

func TestBatchOnFinishSeesEveryOutcome(t *testing.T) {
	t.Parallel()
	b := setup(t, &idem.Config{Queues: map[string]idem.QueueConfig{"default": {MaxWorkers: 2}}})
	ctx := context.Background()
	b.workers.Handle("upload", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
		var a struct{ File string }
		if err := json.Unmarshal(j.Args, &a); err != nil {
			return nil, err
		}
		if a.File == "broken.csv" {
			return nil, idem.JobPermanent(errors.New("unreadable"))
		}
		return json.RawMessage(`{"rows":10}`), nil
	})
	type seen struct {
		counts   map[idem.JobState]int
		finished bool
		errs     []string
	}
	got := make(chan seen, 1)
	b.workers.Handle("report", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
		bt, err := b.client.FinishedBatch(ctx, j)
		if err != nil {
			return nil, err
		}
		s := seen{counts: bt.Counts, finished: bt.Finished}
		for _, c := range bt.Jobs {
			if c.LastError != "" {
				s.errs = append(s.errs, c.LastError)
			}
		}
		got <- s
		return nil, nil
	})
	bt, err := b.client.BatchCreate(ctx, idem.BatchCreateParams{Key: "upload-7",
		Jobs:     uploadJobs("a.csv", "broken.csv", "c.csv"),
		OnFinish: &idem.EnqueueParams{Kind: "report", Args: json.RawMessage(`{"notify":"u1"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if bt.OnFinish == nil || bt.OnFinish.State != idem.StatePending || bt.Total != 3 {
		t.Fatalf("created: total %d, completion job %+v", bt.Total, bt.OnFinish)
	}
	if id, ok := idem.BatchOf(bt.OnFinish); !ok || id != bt.ID {
		t.Fatalf("BatchOf = %d %v, want %d", id, ok, bt.ID)
	}
	b.start(t)
	waitState(t, b, bt.OnFinish.ID, idem.StateCompleted)
	s := <-got
	if !s.finished || s.counts[idem.StateCompleted] != 2 || s.counts[idem.StateDead] != 1 ||
		len(s.errs) != 1 || !strings.Contains(s.errs[0], "unreadable") {
		t.Fatalf("the completion job saw %+v", s)
	}
	// A job that completes no batch has none.
	r, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "upload", Args: json.RawMessage(`{"file":"x"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.FinishedBatch(ctx, r.Job); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("FinishedBatch of a plain job: %v", err)
	}
}

func TestBatchOnFinishBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	for field, of := range map[string]*idem.EnqueueParams{
		"on_finish.kind":            {Kind: ""},
		"on_finish.idempotency_key": {Kind: "r", Opts: &idem.EnqueueOpts{IdempotencyKey: "k"}},
		"on_finish.depends_on":      {Kind: "r", Opts: &idem.EnqueueOpts{DependsOn: []int64{1}}},
		"on_finish.metadata":        {Kind: "r", Opts: &idem.EnqueueOpts{Metadata: json.RawMessage(`{"idem_batch_id":9}`)}},
	} {
		var inv *idemtype.InvalidError
		_, err := b.client.BatchCreate(ctx, idem.BatchCreateParams{Key: "b", Jobs: uploadJobs("a"), OnFinish: of})
		if !errors.As(err, &inv) || inv.Field != field {
			t.Errorf("%s: %v", field, err)
		}
	}
	if jobs, _, _ := b.client.JobList(ctx, &idem.JobListParams{}); len(jobs) != 0 {
		t.Fatalf("%d jobs written by refused batches", len(jobs))
	}
}

// TestBatchJobKeyFormat pins BatchJobKey's stored format: batch key + "/"
// + the job's key or "h" and 16 hex digits of its canonical kind and args;
// past 255 bytes (counted in bytes) 32 hex digits of the SHA-256 of each
// side, joined by "/".
func TestBatchJobKeyFormat(t *testing.T) {
	t.Parallel()
	args := json.RawMessage(`{ "to" : "x" }`)
	for _, tc := range []struct {
		batch, job string
		args       json.RawMessage
		want       string
	}{
		{"b", "row-7", nil, "b/row-7"},
		{"b", "", args, "b/h7056eb7c0126f8c2"},
		{strings.Repeat("b", 200), strings.Repeat("j", 54), nil, strings.Repeat("b", 200) + "/" + strings.Repeat("j", 54)},
		{strings.Repeat("b", 200), strings.Repeat("j", 55), nil,
			"aaebc35c4c4e2cc7ac7c65812a7fa476/2bba1d56bcf9750b986e20d8c1b25eef"},
		{strings.Repeat("b", 237), "", args, strings.Repeat("b", 237) + "/h7056eb7c0126f8c2"},
		{strings.Repeat("b", 239), "", args, "e5dccad4a2b6f0731518c27e18c8f22a/f6328e4ed42aa43936e9cab171585ce2"},
		{strings.Repeat("b", 199) + "é", strings.Repeat("é", 26) + "j", nil, // 255 bytes
			strings.Repeat("b", 199) + "é/" + strings.Repeat("é", 26) + "j"},
		{strings.Repeat("b", 199) + "é", strings.Repeat("é", 27), nil, // 256 bytes
			"4c537eba418a229b1b8ec4f0113259ad/2276e051a6111964a16d9b9a7d073ae9"},
	} {
		got, err := idem.BatchJobKey(tc.batch, tc.job, "send", tc.args)
		if err != nil || got != tc.want {
			t.Errorf("BatchJobKey(%d bytes, %d bytes) = %q, %v; want %q", len(tc.batch), len(tc.job), got, err, tc.want)
		}
	}
}

// TestBatchReadableAfterCompletionJobDeleted: retention (or a DLQ delete)
// may delete a batch's completion job once it finished; the batch itself is
// never deleted, so reading it, cancelling it and repeating its key must
// still work, with no completion job shown.
func TestBatchReadableAfterCompletionJobDeleted(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	params := idem.BatchCreateParams{Key: "export-9", Jobs: uploadJobs("a.csv", "b.csv"),
		OnFinish: &idem.EnqueueParams{Kind: "report"}}
	bt, err := b.client.BatchCreate(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.BatchCancel(ctx, "", bt.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.JobCancel(ctx, "", bt.OnFinish.ID); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	n, err := b.store.JobDeleteFinished(ctx, &store.JobDeleteFinishedParams{CancelledBefore: later, Now: later})
	// The children stay while their keys' dedup windows are open.
	if err != nil || n != 1 {
		t.Fatalf("retention deleted %d jobs, want the completion job: %v", n, err)
	}
	got, err := b.client.BatchGet(ctx, "", bt.ID)
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if got.OnFinish != nil || got.Total != 2 || !got.Finished {
		t.Fatalf("get: completion job %+v, total %d, finished %v", got.OnFinish, got.Total, got.Finished)
	}
	if _, err := b.client.BatchCancel(ctx, "", bt.ID); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	again, err := b.client.BatchCreate(ctx, params)
	if err != nil {
		t.Fatalf("repeat: %v", err)
	}
	if !again.Existing || again.ID != bt.ID {
		t.Fatalf("repeat: %+v", again)
	}
}
