package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/idem-dev/idem/idemclient"
)

func newDLQCmd() *cobra.Command {
	var af apiFlags
	cmd := &cobra.Command{Use: "dlq", Short: "Review the dead-letter queue over the HTTP API"}
	af.register(cmd)
	list := newListCmd(&af, "List dead jobs, newest first", false, (*idemclient.Client).DLQList)
	var rf listFlags
	var all bool
	requeue := &cobra.Command{Use: "requeue [ID...]", Short: "Make dead jobs available again (by ids, or by filter)",
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := af.client()
			if err != nil {
				return err
			}
			var filter *idemclient.Filter
			if len(args) == 0 {
				p := rf.params()
				if f := p.Filter; !all && f.Queue == "" && f.Kind == "" && f.PartitionKey == "" && f.IdempotencyKey == "" && f.ErrorCode == "" {
					return errors.New("give ids, a filter (--queue, --kind, …) or --all")
				}
				filter = &p.Filter
			}
			n, err := cl.DLQRequeue(cmd.Context(), args, filter)
			if err != nil {
				return err
			}
			if af.json {
				return printJSON(cmd.OutOrStdout(), map[string]int{"requeued": n})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "requeued %d jobs\n", n)
			return nil
		}}
	rf.register(requeue, false)
	requeue.Flags().BoolVar(&all, "all", false, "requeue every dead job (up to 1000)")
	del := &cobra.Command{Use: "delete ID", Short: "Delete a dead job and its attempts", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := af.client()
			if err != nil {
				return err
			}
			if err := cl.DLQDelete(cmd.Context(), args[0]); err != nil {
				return err
			}
			if af.json {
				return printJSON(cmd.OutOrStdout(), map[string]string{"deleted": args[0]})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted job %s\n", args[0])
			return nil
		}}
	cmd.AddCommand(list, requeue, del, newDLQResolveCmd(&af))
	return cmd
}
