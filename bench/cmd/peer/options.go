package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

// defaultURL is the database used when IDEM_TEST_DATABASE_URL is not set.
const defaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// options are the flags of the command.
type options struct {
	URL        string
	SingleN    int
	Goroutines int
	BatchN     int
	BatchSize  int
	WorkN      int
	Workers    int
	Conns      int
	Scenarios  string // comma list of single, batch, work
	Keys       string // off, on or both
	Quick      bool
	// RiverFetchCooldown is River's QueueConfig.FetchCooldown in the work
	// scenario; 0 keeps River's default (100 ms).
	RiverFetchCooldown time.Duration
	// RiverDefaultRow adds a work row with River's default FetchCooldown.
	RiverDefaultRow bool
	// Timeout bounds one work measurement.
	Timeout time.Duration
}

func defaultOptions() *options {
	url := os.Getenv("IDEM_TEST_DATABASE_URL")
	if url == "" {
		url = defaultURL
	}
	return &options{
		URL: url, SingleN: 20_000, Goroutines: 16, BatchN: 100_000, BatchSize: 1000,
		WorkN: 100_000, Workers: 100, Conns: 32, Scenarios: "single,batch,work", Keys: "both",
		RiverFetchCooldown: time.Millisecond, Timeout: 10 * time.Minute,
	}
}

// register declares the flags on fs.
func (o *options) register(fs *flag.FlagSet) {
	fs.StringVar(&o.URL, "url", o.URL, "PostgreSQL URL (default IDEM_TEST_DATABASE_URL or the local server)")
	fs.IntVar(&o.SingleN, "single-n", o.SingleN, "jobs inserted one at a time")
	fs.IntVar(&o.Goroutines, "goroutines", o.Goroutines, "goroutines doing single inserts")
	fs.IntVar(&o.BatchN, "batch-n", o.BatchN, "jobs inserted in batches")
	fs.IntVar(&o.BatchSize, "batch-size", o.BatchSize, "jobs per batch (idem allows at most 1000)")
	fs.IntVar(&o.WorkN, "work-n", o.WorkN, "no-op jobs worked")
	fs.IntVar(&o.Workers, "workers", o.Workers, "MaxWorkers of the one queue")
	fs.IntVar(&o.Conns, "conns", o.Conns, "pgxpool MaxConns of each system")
	fs.StringVar(&o.Scenarios, "scenarios", o.Scenarios, "comma list of single, batch, work")
	fs.StringVar(&o.Keys, "keys", o.Keys, "idempotency/unique keys: off, on or both")
	fs.BoolVar(&o.Quick, "quick", o.Quick, "small N (2,000 single, 5,000 batch and work) for a smoke run")
	fs.DurationVar(&o.RiverFetchCooldown, "river-fetch-cooldown", o.RiverFetchCooldown,
		"River QueueConfig.FetchCooldown in the work scenario (River's minimum, 1ms, by default; 0 = River's default, 100ms, which caps a queue at MaxWorkers×10 jobs/s)")
	fs.BoolVar(&o.RiverDefaultRow, "river-default-row", o.RiverDefaultRow, "also work River with its default FetchCooldown (100ms)")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "limit of one work measurement")
}

// finish applies --quick and checks the values.
func (o *options) finish() error {
	if o.Quick {
		o.SingleN, o.BatchN, o.WorkN = min(o.SingleN, 2000), min(o.BatchN, 5000), min(o.WorkN, 5000)
	}
	if o.SingleN < 1 || o.Goroutines < 1 || o.BatchN < 1 || o.BatchSize < 1 || o.WorkN < 1 || o.Workers < 1 || o.Conns < 2 {
		return errors.New("options: N, goroutines, batch size and workers must be positive, conns at least 2")
	}
	if o.BatchSize > 1000 {
		return errors.New("options: --batch-size over 1000 (idem's EnqueueMany limit)")
	}
	if len(o.scenarioList()) == 0 {
		return fmt.Errorf("options: no scenario in %q", o.Scenarios)
	}
	for _, s := range o.scenarioList() {
		if s != "single" && s != "batch" && s != "work" {
			return fmt.Errorf("options: unknown scenario %q", s)
		}
	}
	if o.keyModes() == nil {
		return fmt.Errorf("options: --keys must be off, on or both, not %q", o.Keys)
	}
	return nil
}

func (o *options) scenarioList() []string {
	var out []string
	for _, s := range strings.Split(o.Scenarios, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func (o *options) keyModes() []bool {
	switch o.Keys {
	case "off":
		return []bool{false}
	case "on":
		return []bool{true}
	case "both":
		return []bool{false, true}
	}
	return nil
}
