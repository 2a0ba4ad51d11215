package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemtype"
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
