package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/idem-dev/idem/idemclient"
	"github.com/idem-dev/idem/idemtype"
)

// defaultRequeueLimit is how many dead jobs one `idem dlq requeue` by
// filter requeues at most unless --limit says otherwise.
const defaultRequeueLimit = 100

func newDLQCmd() *cobra.Command {
	var af apiFlags
	cmd := &cobra.Command{Use: "dlq", Short: "Review the dead-letter queue over the HTTP API"}
	af.register(cmd)
	list := newListCmd(&af, "List dead jobs, newest first", false, (*idemclient.Client).DLQList)
	cmd.AddCommand(list, newDLQRequeueCmd(&af), newDLQDeleteCmd(&af), newDLQResolveCmd(&af))
	return cmd
}

func newDLQRequeueCmd(af *apiFlags) *cobra.Command {
	var rf listFlags
	var all, dryRun bool
	requeue := &cobra.Command{Use: "requeue [ID...]", Short: "Make dead jobs available again (by ids, or by filter)",
		Long: `By ids, or by a filter (--queue, --kind, --partition-key, --key, --error-code,
--resolved) or --all. By filter or --all, resolved dead jobs are left
(dealt with, kept for audit) unless --resolved true selects them.
By filter, at most --limit jobs are requeued (the newest, from --cursor);
--dry-run lists the jobs that would be requeued and changes nothing (by
ids: those of the named jobs that are dead, exiting as the real run would).
Ids and filter flags (or --all, --limit, --cursor) do not mix. Jobs are
requeued oldest first, so a FIFO partition runs its oldest job first.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				// By ids the filter flags select nothing: refuse them
				// rather than requeue the ids and drop the flags.
				for _, name := range []string{"all", "queue", "kind", "partition-key", "key", "error-code", "resolved", "limit", "cursor"} {
					if cmd.Flags().Changed(name) {
						return usageErr(fmt.Errorf("--%s selects dead jobs by filter: give it or ids, not both", name))
					}
				}
			}
			cl, err := af.client()
			if err != nil {
				return err
			}
			if rf.limit < 1 {
				return usageErr(fmt.Errorf("--limit %d: want a positive number", rf.limit))
			}
			ids := args
			next := ""
			if len(args) > 0 && dryRun {
				// The usage error the server answers a real run with (an
				// id looked up one by one would be "not found", exit 3).
				for _, id := range args {
					if !isJobID(id) {
						return usageErr(fmt.Errorf("%q is not a job id", id))
					}
				}
				// What a real run requeues: the named jobs that are dead.
				if ids, err = namedDead(cmd.Context(), cl, args); err != nil {
					return err
				}
			}
			if len(ids) == 0 {
				p, err := rf.params()
				if err != nil {
					return err
				}
				if f := p.Filter; !all && f.Queue == "" && f.Kind == "" && f.PartitionKey == "" && f.IdempotencyKey == "" && f.ErrorCode == "" &&
					f.Resolved == nil {
					return usageErr(errors.New("give ids, a filter (--queue, --kind, …) or --all"))
				}
				if p.Filter.Resolved == nil {
					// Resolved dead jobs are dealt with (kept for audit):
					// requeued only when --resolved asks, as by the API.
					unresolved := false
					p.Filter.Resolved = &unresolved
				}
				if ids, next, err = deadIDs(cmd.Context(), cl, p); err != nil {
					return err
				}
			}
			n := 0
			if !dryRun && len(ids) > 0 {
				// Any number of ids, oldest first, in requests the server
				// takes (idemclient.DLQRequeue).
				if n, err = cl.DLQRequeue(cmd.Context(), ids, nil); err != nil {
					return err
				}
			}
			if err := printRequeue(cmd, ids, n, next, dryRun); err != nil {
				return err
			}
			if len(args) > 0 && !dryRun && n < len(ids) {
				// Jobs named that were not requeued: not dead (any more),
				// of another tenant, or gone. Not a silent success.
				return fmt.Errorf("requeued %d of the %d jobs named: the others are not dead jobs of this tenant: %w",
					n, len(ids), idemtype.ErrWrongState)
			}
			if len(args) > 0 && dryRun && len(ids) < len(args) {
				// The exit code the real run would have.
				return fmt.Errorf("would requeue %d of the %d jobs named: the others are not dead jobs of this tenant: %w",
					len(ids), len(args), idemtype.ErrWrongState)
			}
			return nil
		}}
	rf.register(requeue, false)
	registerListCompletions(requeue, af)
	rf.limit = defaultRequeueLimit
	requeue.Flags().Lookup("limit").DefValue = fmt.Sprint(defaultRequeueLimit)
	requeue.Flags().Lookup("limit").Usage = "requeue at most this many jobs by filter"
	requeue.Flags().BoolVar(&all, "all", false, "requeue every unresolved dead job (up to --limit)")
	requeue.Flags().BoolVar(&dryRun, "dry-run", false, "list what would be requeued; change nothing")
	return requeue
}

// isJobID reports whether s is a job id as the API reads one: a positive
// decimal int64 without sign or leading zeros.
func isJobID(s string) bool {
	if s == "" || len(s) > 19 || s[0] == '0' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	_, err := strconv.ParseInt(s, 10, 64)
	return err == nil
}

// namedDead returns the ids, of those named, of dead jobs (a dry run by
// ids: what a real run requeues). A job that does not exist is the error
// a real run meets (not found).
func namedDead(ctx context.Context, cl *idemclient.Client, ids []string) ([]string, error) {
	var dead []string
	for _, id := range ids {
		j, err := cl.GetJob(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("job %s: %w", id, err)
		}
		if j.State == string(idemtype.StateDead) {
			dead = append(dead, id)
		}
	}
	return dead, nil
}

// deadIDs pages through the dead jobs of p until p.Limit ids are found;
// next is the cursor to continue from ("" = no more).
func deadIDs(ctx context.Context, cl *idemclient.Client, p *idemclient.ListParams) (ids []string, next string, err error) {
	want := p.Limit
	page := *p
	for len(ids) < want {
		page.Limit = min(want-len(ids), 500)
		res, err := cl.DLQList(ctx, &page)
		if err != nil {
			return nil, "", fmt.Errorf("list dead jobs: %w", err)
		}
		for _, j := range res.Jobs {
			ids = append(ids, j.ID)
		}
		next = res.NextCursor
		if next == "" || len(res.Jobs) == 0 {
			break
		}
		page.Cursor = next
	}
	return ids, next, nil
}

func printRequeue(cmd *cobra.Command, ids []string, n int, next string, dryRun bool) error {
	out := cmd.OutOrStdout()
	if wantJSON(cmd) {
		res := map[string]any{"requeued": n, "ids": ids, "dry_run": dryRun}
		if next != "" {
			res["next_cursor"] = next
		}
		return printJSON(out, res)
	}
	if dryRun {
		fmt.Fprintf(out, "would requeue %d jobs (dry run):\n", len(ids))
		for _, id := range ids {
			fmt.Fprintln(out, cell(id, 0))
		}
	} else {
		fmt.Fprintf(out, "requeued %d jobs\n", n)
	}
	if next != "" {
		fmt.Fprintf(out, "more dead jobs match: continue with --cursor %s\n", cell(next, 0))
	}
	return nil
}

func newDLQDeleteCmd(af *apiFlags) *cobra.Command {
	return &cobra.Command{Use: "delete ID", Short: "Delete a dead job and its attempts", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := af.client()
			if err != nil {
				return err
			}
			if err := cl.DLQDelete(cmd.Context(), args[0]); err != nil {
				return err
			}
			if wantJSON(cmd) {
				return printJSON(cmd.OutOrStdout(), map[string]string{"deleted": args[0]})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted job %s\n", args[0])
			return nil
		}}
}
