// Package cli implements the idem command line, one file per subcommand.
// Run is the whole program minus the process: tests call it with their own
// arguments and streams.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// env names shared by the subcommands.
const (
	envDatabaseURL = "IDEM_DATABASE_URL"
	defaultDB      = "./idem.db"
)

// Run executes the CLI with args and returns the process exit code.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot(stdin, stdout, stderr)
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(stderr, "idem:", err)
		var ee *exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		return 1
	}
	return 0
}

// exitError carries a specific exit code.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "idem",
		Short:         "Durable jobs that run once",
		Long:          "idem runs durable jobs exactly once: idempotency keys, cached results, retries, a dead-letter queue, FIFO partitions — on embedded SQLite or PostgreSQL.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newMigrateCmd(), newKeyCmd(), newBenchCmd(), newServeCmd(), newAPIKeyCmd(),
		newEnqueueCmd(), newJobsCmd(), newDLQCmd(), newStatsCmd(), newBenchHTTPCmd(), newSchedulesCmd())
	return root
}

// databaseFlag registers --database with its environment default.
func databaseFlag(cmd *cobra.Command, target *string) {
	cmd.Flags().StringVar(target, "database", "",
		"database URL: a SQLite path (sqlite:PATH or PATH) or postgres://… (env "+envDatabaseURL+", default "+defaultDB+")")
}
