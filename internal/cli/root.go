// Package cli implements the idem command line, one file per subcommand.
// Run is the whole program minus the process: tests call it with their own
// arguments and streams.
package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// env names shared by the subcommands.
const (
	envDatabaseURL = "IDEM_DATABASE_URL"
	defaultDB      = "./idem.db"
)

// Run executes the CLI with args and returns the process exit code (see
// the Exit* constants). Errors are printed once, prefixed "idem:", with a
// hint; with --json they are a JSON object {"error": {...}} on stderr.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot(stdin, stdout, stderr)
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		if cmd, _, ferr := root.Find(args); ferr == nil {
			err = withNotFoundHint(err, cmd)
		}
		asJSON, _ := root.PersistentFlags().GetBool("json")
		return reportError(stderr, err, asJSON || jsonArg(args))
	}
	return ExitOK
}

// jsonArg reports whether args ask for JSON (--json, or --json=V with V
// true): an error met while parsing the flags, before --json was read, is
// then still reported as JSON. Arguments after "--" are not flags.
func jsonArg(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "--json" {
			return true
		}
		if v, ok := strings.CutPrefix(a, "--json="); ok {
			if b, err := strconv.ParseBool(v); err == nil && b {
				return true
			}
		}
	}
	return false
}

// wantJSON reports whether the command runs with --json.
func wantJSON(cmd *cobra.Command) bool {
	v, _ := cmd.Flags().GetBool("json")
	return v
}

func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "idem",
		Short:         "Durable jobs that run once",
		Long:          "idem runs durable jobs exactly once: idempotency keys, cached results, retries, a dead-letter queue, FIFO partitions — on embedded SQLite or PostgreSQL.\n\n" + exitCodesHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionString(),
	}
	root.PersistentFlags().Bool("json", false, "print JSON (errors too, on stderr)")
	root.PersistentPreRun = func(cmd *cobra.Command, _ []string) { trimListFlags(cmd) }
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErr(err) })
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newMigrateCmd(), newKeyCmd(), newBenchCmd(), newServeCmd(), newAPIKeyCmd(),
		newEnqueueCmd(), newJobsCmd(), newDLQCmd(), newStatsCmd(), newBenchHTTPCmd(), newVersionCmd(), newBatchCmd())
	root.AddCommand(newTargetsCmd(), newTopicsCmd())
	root.AddCommand(newLimitsCmd(), newQueuesCmd())
	root.AddCommand(newSchedulesCmd(), newBenchNodeCmd(), newBenchGrowthCmd())
	refuseUnknownSubcommands(root)
	return root
}

// trimListFlags trims the spaces around each item of the comma-separated
// list flags of cmd (--type, --depends-on, …), so "a, b" is a and b as in
// idem.toml's environment lists, not a and " b".
func trimListFlags(cmd *cobra.Command) {
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		sv, ok := f.Value.(pflag.SliceValue)
		if !ok || !f.Changed || f.Value.Type() != "stringSlice" {
			return
		}
		items := sv.GetSlice()
		for i := range items {
			items[i] = strings.TrimSpace(items[i])
		}
		_ = sv.Replace(items) // a string slice takes any strings
	})
}

// splitList splits a comma-separated list, trimming the spaces around each
// item ("a, b" is a and b).
func splitList(s string) []string {
	items := strings.Split(s, ",")
	for i := range items {
		items[i] = strings.TrimSpace(items[i])
	}
	return items
}

// refuseUnknownSubcommands makes every command group below root (jobs,
// dlq, schedules, …) refuse an argument that names none of its commands
// as a usage error (exit 2). Cobra checks that only for the root: a
// misspelt `idem jobs cancle 5` printed the group's help and exited 0, as
// if it had worked. A group given no argument still prints its help.
func refuseUnknownSubcommands(root *cobra.Command) {
	for _, c := range root.Commands() {
		if c.HasSubCommands() && !c.Runnable() {
			c.RunE = func(cmd *cobra.Command, args []string) error {
				if len(args) > 0 {
					return usageErr(fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath()))
				}
				return cmd.Help()
			}
		}
		refuseUnknownSubcommands(c)
	}
}

// databaseFlag registers --database with its environment default.
func databaseFlag(cmd *cobra.Command, target *string) {
	cmd.Flags().StringVar(target, "database", "",
		"database URL: a SQLite path (sqlite:PATH or PATH) or postgres://… (env "+envDatabaseURL+", default "+defaultDB+")")
}
