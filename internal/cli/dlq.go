package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/idem-dev/idem/idemclient"
	"github.com/idem-dev/idem/idemhttp"
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
--dry-run lists the jobs that would be requeued and changes nothing. Jobs
are requeued oldest first, so a FIFO partition runs its oldest job first.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := af.client()
			if err != nil {
				return err
			}
			if rf.limit < 1 {
				return usageErr(fmt.Errorf("--limit %d: want a positive number", rf.limit))
			}
			ids := args
			next := ""
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
			if !dryRun {
				if n, err = requeueIDs(cmd.Context(), cl, ids); err != nil {
					return err
				}
			}
			return printRequeue(cmd, ids, n, next, dryRun)
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

// requeueIDs requeues ids in requests of at most idemhttp.MaxBatch ids
// (the most one POST /v1/dlq/requeue takes), oldest first, and
// returns how many were requeued; on an error it says how many were
// requeued before it. Oldest first: a worker may claim between two
// requests, and a FIFO partition whose newer dead jobs were requeued first
// would run it before its older ones, still dead (finished), came back.
func requeueIDs(ctx context.Context, cl *idemclient.Client, ids []string) (int, error) {
	ids = oldestFirst(ids)
	total := 0
	for chunk := range slices.Chunk(ids, idemhttp.MaxBatch) {
		n, err := cl.DLQRequeue(ctx, chunk, nil)
		if err != nil {
			if total > 0 {
				return total, fmt.Errorf("requeued %d of %d jobs, then: %w", total, len(ids), err)
			}
			return 0, err
		}
		total += n
	}
	return total, nil
}

// oldestFirst returns ids in increasing numeric order (job ids grow in
// enqueue order), or as they are when one is not a number (the server
// refuses it).
func oldestFirst(ids []string) []string {
	nums := make([]int64, len(ids))
	for i, id := range ids {
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil {
			return ids
		}
		nums[i] = n
	}
	out := slices.Clone(ids)
	idx := make([]int, len(ids))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(nums[a], nums[b]) })
	for i, j := range idx {
		out[i] = ids[j]
	}
	return out
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
