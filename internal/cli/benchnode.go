package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store/pgstore"
)

// benchNodeFlags are the inputs of `idem bench-node`.
type benchNodeFlags struct {
	db      string
	schema  string
	queue   string
	workers int
	name    string
}

// newBenchNodeCmd returns the hidden command one node of the multi-node
// benchmark runs (bench/cmd/peer -scenarios multinode starts several and
// SIGKILLs the leader): the runtime of `idem serve` — the same client
// configuration, defaults and IDEM_* variables (IDEM_JOBS_LEASE,
// IDEM_MAINTENANCE_RESCUE_INTERVAL, IDEM_MAINTENANCE_LEADER_TTL …), the
// maintenance leader election — without the HTTP server, working one queue
// with Go handlers: "noop" returns at once, "sleep" sleeps args.ms
// milliseconds. It prints its settings and "ready" once started, and stops
// on SIGTERM or SIGINT.
func newBenchNodeCmd() *cobra.Command {
	var f benchNodeFlags
	cmd := &cobra.Command{
		Use:    "bench-node",
		Short:  "One worker node of the multi-node benchmark (PostgreSQL)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBenchNode(cmd.Context(), cmd, &f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.db, "database", "", "PostgreSQL URL (required)")
	fl.StringVar(&f.schema, "schema", "", "schema of idem's tables, already migrated (required)")
	fl.StringVar(&f.queue, "queue", "bench", "queue to work")
	fl.IntVar(&f.workers, "workers", 100, "MaxWorkers of the queue")
	fl.StringVar(&f.name, "name", "", "worker id of this node (the leader row's owner)")
	return cmd
}

// benchSleepArgs are the args of a "sleep" job.
type benchSleepArgs struct {
	MS int `json:"ms"`
}

func runBenchNode(ctx context.Context, cmd *cobra.Command, f *benchNodeFlags) error {
	if !isPostgres(f.db) || f.schema == "" || f.workers < 1 {
		return usageErr(errors.New("bench-node needs --database postgres://…, --schema and --workers ≥ 1"))
	}
	cfg, err := loadConfig("", os.Environ(), nil) // serve's defaults and IDEM_* variables
	if err != nil {
		return err
	}
	logger, err := newLogger(cmd.ErrOrStderr(), "warn", "text")
	if err != nil {
		return err
	}
	st, err := pgstore.Open(ctx, f.db, &pgstore.Config{Schema: f.schema, SkipMigrate: true, Logger: logger})
	if err != nil {
		return fmt.Errorf("open postgres: %w", err)
	}
	defer st.Close()
	workers := idem.NewWorkers()
	workers.Handle("noop", func(context.Context, *idem.JobRow) (json.RawMessage, error) { return nil, nil })
	workers.Handle("sleep", func(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
		var a benchSleepArgs
		if err := json.Unmarshal(j.Args, &a); err != nil {
			return nil, err
		}
		select {
		case <-time.After(time.Duration(a.MS) * time.Millisecond):
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	client, err := idem.NewClient(st, cfg.clientConfig(&idem.Config{Logger: logger, Workers: workers, WorkerID: f.name,
		Queues: map[string]idem.QueueConfig{f.queue: {MaxWorkers: f.workers}}}))
	if err != nil {
		return usageErr(err)
	}
	if err := client.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "settings lease=%s heartbeat=%s rescue_interval=%s leader_ttl=%s poll_interval=%s\n",
		time.Duration(cfg.Jobs.Lease), (time.Duration(cfg.Jobs.Lease) / 3).Round(time.Millisecond), time.Duration(cfg.Maintenance.RescueInterval),
		time.Duration(cfg.Maintenance.LeaderTTL), idem.DefaultPollInterval)
	fmt.Fprintln(out, "ready", f.name)
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return client.Stop(sctx)
}
