package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemclient"
	"github.com/idem-dev/idem/idemhttp/wire"
	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/retryspec"
)

// newBatchCmd is `idem batch create|get|cancel` over the HTTP API.
func newBatchCmd() *cobra.Command {
	var af apiFlags
	cmd := &cobra.Command{Use: "batch", Short: "Create, show and cancel batches of jobs over the HTTP API"}
	af.register(cmd)
	var key, file, meta, onFinish string
	create := &cobra.Command{Use: "create", Short: "Create a batch once per key from a JSON array of jobs (--file, - = stdin)",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if key == "" || file == "" {
				return usageErr(errors.New("--key and --file are required"))
			}
			jobs, err := readBatchJobs(cmd, file)
			if err != nil {
				return err
			}
			var metadata json.RawMessage
			if meta != "" {
				if !json.Valid([]byte(meta)) {
					return usageErr(errors.New("--metadata: not valid JSON"))
				}
				metadata = json.RawMessage(meta)
			}
			req := &idemclient.BatchCreateRequest{Key: key, Metadata: metadata, Jobs: jobs}
			if onFinish != "" {
				var of batchJobJSON
				if err := decodeJobsJSON([]byte(onFinish), &of); err != nil {
					return usageErr(fmt.Errorf("--on-finish: a JSON job: %w", err))
				}
				if req.OnFinish, err = of.request(); err != nil {
					return usageErr(fmt.Errorf("--on-finish: %w", err))
				}
			}
			cl, err := af.client()
			if err != nil {
				return err
			}
			res, err := cl.BatchCreateWith(cmd.Context(), req)
			if err != nil {
				return err
			}
			if wantJSON(cmd) {
				return printJSON(cmd.OutOrStdout(), res)
			}
			verb := "created"
			if res.Existing {
				verb = "already created"
			}
			printBatch(cmd.OutOrStdout(), res.Batch, verb)
			return nil
		}}
	create.Flags().StringVar(&key, "key", "", "the batch's idempotency key")
	create.Flags().StringVar(&file, "file", "", "JSON array of jobs ({kind, args, queue, idempotency_key, …}); - = stdin")
	create.Flags().StringVar(&meta, "metadata", "", "a JSON object kept with the batch")
	create.Flags().StringVar(&onFinish, "on-finish", "", "the completion job ({kind, queue, args, …}): runs once every job finished, whatever the outcome")
	get := &cobra.Command{Use: "get ID", Short: "Show a batch with its counts by state", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return batchCall(cmd, &af, args[0], (*idemclient.Client).BatchGet, "")
		}}
	cancel := &cobra.Command{Use: "cancel ID", Short: "Cancel every unfinished job of a batch", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return batchCall(cmd, &af, args[0], (*idemclient.Client).BatchCancel, "cancelled")
		}}
	cmd.AddCommand(create, get, cancel)
	return cmd
}

func batchCall(cmd *cobra.Command, af *apiFlags, id string,
	fn func(*idemclient.Client, context.Context, string) (*idemclient.Batch, error), verb string) error {
	cl, err := af.client()
	if err != nil {
		return err
	}
	b, err := fn(cl, cmd.Context(), id)
	if err != nil {
		return err
	}
	if wantJSON(cmd) {
		return printJSON(cmd.OutOrStdout(), b)
	}
	printBatch(cmd.OutOrStdout(), b, verb)
	return nil
}

func readBatchJobs(cmd *cobra.Command, file string) ([]*idemclient.EnqueueRequest, error) {
	var data []byte
	var err error
	if file == "-" {
		data, err = io.ReadAll(cmd.InOrStdin())
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, fmt.Errorf("read jobs: %w", err)
	}
	var raw []batchJobJSON
	if err := decodeJobsJSON(data, &raw); err != nil {
		return nil, usageErr(fmt.Errorf("read jobs: a JSON array of jobs: %w", err))
	}
	out := make([]*idemclient.EnqueueRequest, len(raw))
	for i := range raw {
		if out[i], err = raw[i].request(); err != nil {
			return nil, usageErr(fmt.Errorf("read jobs: jobs[%d]: %w", i, err))
		}
	}
	return out, nil
}

// decodeJobsJSON decodes one JSON value into v, refusing fields a job does
// not have (a misspelt field is an error naming it, not a default).
func decodeJobsJSON(data []byte, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("text after the JSON value")
	}
	return nil
}

// batchJobJSON is one job of a batch file, or the --on-finish job: the
// fields of an enqueue (wire.EnqueueRequest).
type batchJobJSON struct {
	Kind           string          `json:"kind"`
	Queue          string          `json:"queue"`
	Args           json.RawMessage `json:"args"`
	IdempotencyKey string          `json:"idempotency_key"`
	Priority       int             `json:"priority"`
	MaxAttempts    *int            `json:"max_attempts"` // an explicit 0 is refused, as the API does
	PartitionKey   string          `json:"partition_key"`
	Metadata       json.RawMessage `json:"metadata"`
	Retry          *wire.RetrySpec `json:"retry"`
	RunAt          string          `json:"run_at"`
	DependsOn      []wire.JobID    `json:"depends_on"`
	DedupWindow    *string         `json:"dedup_window"`
	ResultTTL      *string         `json:"result_ttl"`
	Timeout        *string         `json:"timeout"`
}

func (r *batchJobJSON) request() (*idemclient.EnqueueRequest, error) {
	out := &idemclient.EnqueueRequest{Kind: r.Kind, Queue: r.Queue, Args: r.Args, IdempotencyKey: r.IdempotencyKey,
		Priority: r.Priority, PartitionKey: r.PartitionKey, Metadata: r.Metadata}
	if r.MaxAttempts != nil {
		if *r.MaxAttempts == 0 {
			// 0 would be sent as no value: the server's default.
			return nil, idemtype.Invalid("max_attempts", "must be between 1 and %d", idem.MaxMaxAttempts)
		}
		out.MaxAttempts = *r.MaxAttempts
	}
	for _, id := range r.DependsOn {
		out.DependsOn = append(out.DependsOn, string(id))
	}
	if r.RunAt != "" {
		t, err := time.Parse(time.RFC3339Nano, r.RunAt)
		if err != nil {
			return nil, fmt.Errorf("run_at: want an RFC 3339 time: %w", err)
		}
		out.RunAt = t
	}
	for _, d := range []struct {
		name string
		v    *string
		dst  **time.Duration
	}{{"dedup_window", r.DedupWindow, &out.DedupWindow}, {"result_ttl", r.ResultTTL, &out.ResultTTL}, {"timeout", r.Timeout, &out.Timeout}} {
		if d.v == nil {
			continue
		}
		v, err := jobDuration(d.name, *d.v)
		if err != nil {
			return nil, err
		}
		*d.dst = v
	}
	if r.Retry == nil {
		return out, nil
	}
	p, err := retryPolicy(r.Retry)
	if err != nil {
		return nil, err
	}
	out.Retry = p
	return out, nil
}

// retryFlag decodes a --retry flag (enqueue, schedules put): one JSON
// object with the fields of `retry` (max_attempts, base, factor, max,
// jitter, delays) and no others. Its values are checked by retryPolicy
// for an enqueue, by the server for a schedule.
func retryFlag(v string) (*wire.RetrySpec, error) {
	var spec *wire.RetrySpec
	dec := json.NewDecoder(strings.NewReader(v))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil || spec == nil || dec.More() {
		if err == nil {
			err = errors.New("want one JSON object")
		}
		return nil, usageErr(fmt.Errorf("--retry: %w", err))
	}
	return spec, nil
}

// retryPolicy is spec (not nil) as a client policy, checked by the one
// parser of the retry object the server uses (internal/retryspec), so the
// CLI refuses what the API refuses, naming the same field
// ("invalid retry.base: …"), and sends what it accepts.
func retryPolicy(spec *wire.RetrySpec) (*idemclient.RetryPolicy, error) {
	pol, attempts, err := retryspec.Parse(spec)
	if err != nil {
		return nil, err
	}
	p := &idemclient.RetryPolicy{MaxAttempts: attempts, Jitter: spec.Jitter}
	if pol != nil {
		p.Base, p.Factor, p.Max, p.Delays = pol.Base, pol.Factor, pol.Max, pol.Delays
	}
	return p, nil
}

func printBatch(w io.Writer, b *idemclient.Batch, verb string) {
	if verb != "" {
		fmt.Fprintf(w, "batch %s %s\n", cell(b.ID, 0), verb)
	}
	fmt.Fprintf(w, "batch %s key %s: %d jobs, finished %v\n", cell(b.ID, 0), cell(b.Key, 0), b.Total, b.Finished)
	if b.OnFinish != nil {
		fmt.Fprintf(w, "  on finish: job %s (%s) %s\n", cell(b.OnFinish.ID, 0), cell(b.OnFinish.Kind, 0), cell(b.OnFinish.State, 0))
	}
	for _, st := range []string{"pending", "scheduled", "available", "running", "retryable", "completed", "dead", "cancelled"} {
		if n := b.Counts[st]; n > 0 {
			fmt.Fprintf(w, "  %-10s %d\n", st, n)
		}
	}
}

// newDLQResolveCmd is `idem dlq resolve ID --note`.
func newDLQResolveCmd(af *apiFlags) *cobra.Command {
	var note string
	cmd := &cobra.Command{Use: "resolve ID", Short: "Mark a dead job resolved (kept for audit)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := af.client()
			if err != nil {
				return err
			}
			j, err := cl.DLQResolve(cmd.Context(), args[0], note)
			if err != nil {
				return err
			}
			if wantJSON(cmd) {
				return printJSON(cmd.OutOrStdout(), j)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "resolved job %s\n", cell(j.ID, 0))
			return nil
		}}
	cmd.Flags().StringVar(&note, "note", "", "why the dead job is resolved")
	return cmd
}
