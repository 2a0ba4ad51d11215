package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
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
	// Table is "issue" (the five PostgreSQL rows of issue 14, River's COPY
	// path only) or "full" (also keyed single inserts and River InsertMany).
	Table string
	Quick bool
	// RiverFetchCooldown is River's QueueConfig.FetchCooldown in the work
	// scenario; 0 keeps River's default (100 ms).
	RiverFetchCooldown time.Duration
	// RiverDefaultRow adds a work row with River's default FetchCooldown.
	RiverDefaultRow bool
	// Timeout bounds one work measurement.
	Timeout time.Duration
	// CPUProfile is a directory for one CPU profile per idem measurement.
	CPUProfile string

	// The multinode scenario: node counts, backlog, pool size of a node,
	// leader kill, and the nodes' settings (empty: idem serve's defaults).
	MNNodes          string
	MNJobs           int
	MNNodeConns      int
	MNKill           bool
	MNLease          string
	MNRescueInterval string
	MNLeaderTTL      string
}

func defaultOptions() *options {
	url := os.Getenv("IDEM_TEST_DATABASE_URL")
	if url == "" {
		url = defaultURL
	}
	return &options{
		URL: url, SingleN: 20_000, Goroutines: 16, BatchN: 100_000, BatchSize: 1000,
		WorkN: 100_000, Workers: 100, Conns: 32, Scenarios: "single,batch,work", Keys: "both", Table: "issue",
		RiverFetchCooldown: time.Millisecond, Timeout: 10 * time.Minute,
		MNNodes: "1,2,3", MNJobs: 50_000, MNNodeConns: 20, MNKill: true,
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
	fs.StringVar(&o.Scenarios, "scenarios", o.Scenarios, "comma list of single, batch, work, multinode")
	fs.StringVar(&o.Keys, "keys", o.Keys, "idempotency/unique keys: off, on or both")
	fs.StringVar(&o.Table, "table", o.Table, "issue: the rows of issue 14 (single without keys, batch vs River COPY, work; with targets); full: also keyed single inserts and River InsertMany")
	fs.BoolVar(&o.Quick, "quick", o.Quick, "small N (2,000 single, 5,000 batch and work) for a smoke run")
	fs.DurationVar(&o.RiverFetchCooldown, "river-fetch-cooldown", o.RiverFetchCooldown,
		"River QueueConfig.FetchCooldown in the work scenario (River's minimum, 1ms, by default; 0 = River's default, 100ms, which caps a queue at MaxWorkers×10 jobs/s)")
	fs.BoolVar(&o.RiverDefaultRow, "river-default-row", o.RiverDefaultRow, "also work River with its default FetchCooldown (100ms)")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "limit of one work measurement")
	fs.StringVar(&o.CPUProfile, "cpuprofile", o.CPUProfile, "directory (existing) for a CPU profile of each idem measurement: <scenario>[-keys].pprof")
	fs.StringVar(&o.MNNodes, "mn-nodes", o.MNNodes, "multinode: comma list of node counts")
	fs.IntVar(&o.MNJobs, "mn-jobs", o.MNJobs, "multinode: no-op jobs worked per node count")
	fs.IntVar(&o.MNNodeConns, "mn-node-conns", o.MNNodeConns, "multinode: pool_max_conns of each node (3 nodes must fit in max_connections)")
	fs.BoolVar(&o.MNKill, "mn-kill", o.MNKill, "multinode: SIGKILL the maintenance leader of 3 nodes and time the rescue")
	fs.StringVar(&o.MNLease, "mn-lease", o.MNLease, "multinode: the nodes' IDEM_JOBS_LEASE (default: idem serve's, 30s)")
	fs.StringVar(&o.MNRescueInterval, "mn-rescue-interval", o.MNRescueInterval, "multinode: the nodes' IDEM_MAINTENANCE_RESCUE_INTERVAL (default 5s)")
	fs.StringVar(&o.MNLeaderTTL, "mn-leader-ttl", o.MNLeaderTTL, "multinode: the nodes' IDEM_MAINTENANCE_LEADER_TTL (default 10s)")
}

// finish applies --quick and checks the values.
func (o *options) finish() error {
	if o.Quick {
		o.SingleN, o.BatchN, o.WorkN = min(o.SingleN, 2000), min(o.BatchN, 5000), min(o.WorkN, 5000)
		o.MNJobs = min(o.MNJobs, 5000)
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
		if s != "single" && s != "batch" && s != "work" && s != "multinode" {
			return fmt.Errorf("options: unknown scenario %q", s)
		}
	}
	if o.hasScenario("multinode") {
		if o.MNJobs < 1 || o.MNNodeConns < 4 || len(o.nodeCounts()) == 0 {
			return errors.New("options: --mn-jobs must be positive, --mn-node-conns at least 4, --mn-nodes a list of counts ≥ 1")
		}
	}
	if o.Table != "issue" && o.Table != "full" {
		return fmt.Errorf("options: --table must be issue or full, not %q", o.Table)
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

// step is one scenario in one key mode.
type step struct {
	name string
	keys bool
}

// steps returns the measurements to run, in table order. The issue table
// runs single inserts without keys only.
func (o *options) steps() []step {
	var out []step
	if o.Table == "issue" {
		for _, st := range []step{{"single", false}, {"batch", false}, {"batch", true}, {"work", false}, {"work", true}} {
			if o.hasScenario(st.name) && slices.Contains(o.keyModes(), st.keys) {
				out = append(out, st)
			}
		}
		return out
	}
	for _, keys := range o.keyModes() {
		for _, sc := range o.scenarioList() {
			if sc != "multinode" {
				out = append(out, step{sc, keys})
			}
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

// hasScenario reports whether name is selected.
func (o *options) hasScenario(name string) bool {
	return slices.Contains(o.scenarioList(), name)
}

// nodeCounts returns the node counts of --mn-nodes, or nil when one is not
// a positive number.
func (o *options) nodeCounts() []int {
	var out []int
	for _, s := range strings.Split(o.MNNodes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return nil
		}
		out = append(out, n)
	}
	return out
}
