package cli

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemclient"
	"github.com/idem-dev/idem/internal/retryspec"
)

type enqueueFlags struct {
	args, queue, key, runAt, partition, dedup, ttl, metadata, retry, timeout string
	priority, maxAttempts                                                    int
	dependsOn                                                                []string
}

func newEnqueueCmd() *cobra.Command {
	var af apiFlags
	var f enqueueFlags
	cmd := &cobra.Command{
		Use:   "enqueue KIND",
		Short: "Enqueue a job over the HTTP API",
		Long: `Enqueues one job of KIND. With --key the job is created once per key: a repeat
returns the existing job. Without it the client still sends a random key, so its
own retries never create two jobs.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("max-attempts") && f.maxAttempts < 1 {
				// 0 would be sent as no value: the server's default.
				return usageErr(fmt.Errorf("--max-attempts %d: want 1 to 1000", f.maxAttempts))
			}
			req, err := f.request(args[0])
			if err != nil {
				return err
			}
			cl, err := af.client()
			if err != nil {
				return err
			}
			res, err := cl.Enqueue(cmd.Context(), req)
			if err != nil {
				return err
			}
			if wantJSON(cmd) {
				return printJSON(cmd.OutOrStdout(), res)
			}
			verb := "created"
			if res.Existing {
				verb = "existing (idempotency key already used)"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "job %s %s: queue=%s kind=%s state=%s\n", cell(res.Job.ID, 0), verb, cell(res.Job.Queue, 0),
				cell(res.Job.Kind, 0), cell(res.Job.State, 0))
			return nil
		},
	}
	af.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.args, "args", "", "args as JSON (default {})")
	fl.StringVar(&f.queue, "queue", "", "queue (default \"default\")")
	fl.StringVar(&f.key, "key", "", "idempotency key")
	fl.StringVar(&f.runAt, "run-at", "", "not before this RFC 3339 time")
	fl.StringVar(&f.partition, "partition-key", "", "FIFO partition key")
	fl.StringVar(&f.dedup, "dedup-window", "", "how long the key blocks new jobs (e.g. 168h or 3600 seconds; 0s = while unfinished; forever = never reopens)")
	fl.StringVar(&f.ttl, "result-ttl", "", "how long the result is cached (e.g. 168h or 3600 seconds)")
	fl.StringVar(&f.timeout, "timeout", "", "limit of one attempt (e.g. 30s or 30 seconds; default the queue's or kind's)")
	fl.StringVar(&f.metadata, "metadata", "", "metadata as a JSON object")
	fl.IntVar(&f.priority, "priority", 0, "priority (higher first)")
	fl.IntVar(&f.maxAttempts, "max-attempts", 0, "attempts before the job is dead (default: the server's)")
	fl.StringSliceVar(&f.dependsOn, "depends-on", nil, "ids of jobs that must complete first")
	fl.StringVar(&f.retry, "retry", "", `retry policy as JSON, e.g. '{"delays":["1m","2m","4m"]}' (max_attempts, base, factor, max, jitter, delays)`)
	return cmd
}

func (f *enqueueFlags) request(kind string) (*idemclient.EnqueueRequest, error) {
	req := &idemclient.EnqueueRequest{Kind: kind, Queue: f.queue, IdempotencyKey: f.key, PartitionKey: f.partition,
		Priority: f.priority, MaxAttempts: f.maxAttempts, DependsOn: f.dependsOn}
	for _, j := range []struct {
		name, v string
		dst     *json.RawMessage
	}{{"--args", f.args, &req.Args}, {"--metadata", f.metadata, &req.Metadata}} {
		if j.v == "" {
			continue
		}
		if !json.Valid([]byte(j.v)) {
			return nil, usageErr(fmt.Errorf("%s: not valid JSON", j.name))
		}
		*j.dst = json.RawMessage(j.v)
	}
	if f.retry != "" {
		spec, err := retryFlag(f.retry)
		if err != nil {
			return nil, err
		}
		if req.Retry, err = retryPolicy(spec); err != nil {
			return nil, usageErr(fmt.Errorf("--retry: %w", err))
		}
	}
	if f.runAt != "" {
		t, err := time.Parse(time.RFC3339, f.runAt)
		if err != nil {
			return nil, usageErr(fmt.Errorf("--run-at: want an RFC 3339 time: %w", err))
		}
		req.RunAt = t
	}
	for _, d := range []struct {
		flag, field, v string
		dst            **time.Duration
	}{{"--dedup-window", "dedup_window", f.dedup, &req.DedupWindow}, {"--result-ttl", "result_ttl", f.ttl, &req.ResultTTL},
		{"--timeout", "timeout", f.timeout, &req.Timeout}} {
		if d.v == "" {
			continue
		}
		v, err := jobDuration(d.field, d.v)
		if err != nil {
			return nil, usageErr(fmt.Errorf("%s: %w", d.flag, err))
		}
		*d.dst = v
	}
	return req, nil
}

// jobDuration parses the value of a job's duration field (dedup_window,
// result_ttl, timeout) as POST /v1/jobs does, with the server's own parser
// (internal/retryspec.Duration): Go syntax or integer seconds, not
// negative; dedup_window also "forever" (idemclient.DedupForever, sent as
// "forever"). A refusal is an *idemtype.InvalidError naming field; the
// server's further checks (a positive result_ttl) answer for themselves.
func jobDuration(field, v string) (*time.Duration, error) {
	if field == "dedup_window" && v == idem.DedupForeverName {
		d := idemclient.DedupForever
		return &d, nil
	}
	return retryspec.Duration(field, &v)
}
