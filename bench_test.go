package idem_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/idem-dev/idem"
)

// Client-level benchmarks on a SQLite file. Figures go to BENCHMARKS.md.

func benchClient(b *testing.B, cfg *idem.Config) *idem.Client {
	b.Helper()
	st := testStore(b)
	if cfg == nil {
		cfg = &idem.Config{}
	}
	cfg.Logger = quietLogger()
	c, err := idem.NewClient(st, cfg)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

func BenchmarkEnqueueSingleParallel(b *testing.B) {
	c := benchClient(b, nil)
	ctx := context.Background()
	b.SetParallelism(8) // 16 goroutines on 2 cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "noop"}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

func BenchmarkEnqueueBatch1000(b *testing.B) {
	c := benchClient(b, nil)
	ctx := context.Background()
	items := make([]idem.EnqueueParams, 1000)
	for i := range items {
		items[i] = idem.EnqueueParams{Kind: "noop", Args: json.RawMessage(`{"n":1}`)}
	}
	b.ResetTimer()
	for range b.N {
		if _, err := c.EnqueueMany(ctx, items); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(items))/b.Elapsed().Seconds(), "jobs/s")
}

func BenchmarkEnqueueBatch1000WithKeys(b *testing.B) {
	c := benchClient(b, nil)
	ctx := context.Background()
	items := make([]idem.EnqueueParams, 1000)
	b.ResetTimer()
	for n := range b.N {
		for i := range items {
			items[i] = idem.EnqueueParams{Kind: "noop", Opts: &idem.EnqueueOpts{IdempotencyKey: fmt.Sprintf("k-%d-%d", n, i)}}
		}
		if _, err := c.EnqueueMany(ctx, items); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(items))/b.Elapsed().Seconds(), "jobs/s")
}

func BenchmarkEnqueueDedupHit(b *testing.B) {
	c := benchClient(b, nil)
	ctx := context.Background()
	p := idem.EnqueueParams{Kind: "noop", Opts: &idem.EnqueueOpts{IdempotencyKey: "dup"}}
	if _, err := c.EnqueueRaw(ctx, p); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		r, err := c.EnqueueRaw(ctx, p)
		if err != nil || !r.Existing {
			b.Fatalf("%v %v", r, err)
		}
	}
}

// BenchmarkWork measures claim + run + complete of no-op jobs with 100 workers.
func BenchmarkWork(b *testing.B) {
	var done atomic.Int64
	all := make(chan struct{})
	workers := idem.NewWorkers()
	workers.Handle("noop", func(context.Context, *idem.JobRow) (json.RawMessage, error) {
		if done.Add(1) == int64(b.N) {
			close(all)
		}
		return nil, nil
	})
	c := benchClient(b, &idem.Config{Workers: workers, Queues: queues(benchWorkers)})
	ctx := context.Background()
	for off := 0; off < b.N; off += idem.MaxBatch {
		items := make([]idem.EnqueueParams, min(idem.MaxBatch, b.N-off))
		for i := range items {
			items[i] = idem.EnqueueParams{Kind: "noop"}
		}
		if _, err := c.EnqueueMany(ctx, items); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	<-all
	_ = c.Stop(ctx) // waits for the last completions to be written
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// benchWorkers is the worker count of BenchmarkWork (IDEM_BENCH_WORKERS).
var benchWorkers = func() int {
	if n, err := strconv.Atoi(os.Getenv("IDEM_BENCH_WORKERS")); err == nil && n > 0 {
		return n
	}
	return 100
}()

// BenchmarkDependencyChain: b.N jobs, each depending on the one before,
// alternately in two queues; ns/op is the time from one job's completion
// to the next one's start and run (the release of a dependant and the
// wake-up of its queue's workers), measured from Start to the last job.
func BenchmarkDependencyChain(b *testing.B) {
	var done atomic.Int64
	all := make(chan struct{})
	workers := idem.NewWorkers()
	workers.Handle("step", func(context.Context, *idem.JobRow) (json.RawMessage, error) {
		if done.Add(1) == int64(b.N) {
			close(all)
		}
		return nil, nil
	})
	c := benchClient(b, &idem.Config{Workers: workers, Queues: map[string]idem.QueueConfig{
		"c0": {MaxWorkers: 4}, "c1": {MaxWorkers: 4}}})
	ctx := context.Background()
	var prev int64
	for i := range b.N {
		o := &idem.EnqueueOpts{Queue: "c" + strconv.Itoa(i%2)}
		if prev != 0 {
			o.DependsOn = []int64{prev}
		}
		res, err := c.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "step", Opts: o})
		if err != nil {
			b.Fatal(err)
		}
		prev = res.Job.ID
	}
	b.ResetTimer()
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	<-all
	b.StopTimer()
	_ = c.Stop(ctx)
}
