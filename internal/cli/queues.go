package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newQueuesCmd() *cobra.Command {
	var af apiFlags
	cmd := &cobra.Command{Use: "queues", Short: "Pause and resume queues on every node, over the HTTP API"}
	af.register(cmd)
	for _, verb := range []string{"pause", "resume"} {
		var tenant string
		sub := &cobra.Command{Use: verb + " QUEUE", Args: cobra.ExactArgs(1),
			Short: map[string]string{
				"pause":  "Stop claims of a queue (or one tenant's work in it); jobs stay available, running jobs finish",
				"resume": "Let claims of a paused queue (or tenant's work) start again",
			}[verb],
			RunE: func(cmd *cobra.Command, args []string) error {
				cl, err := af.client()
				if err != nil {
					return err
				}
				fn := cl.QueuePause
				if verb == "resume" {
					fn = cl.QueueResume
				}
				r, err := fn(cmd.Context(), args[0], tenant)
				if err != nil {
					return err
				}
				if wantJSON(cmd) {
					return printJSON(cmd.OutOrStdout(), r)
				}
				what := "queue " + cell(r.Queue, 0)
				if r.Tenant != "" {
					what = "tenant " + cell(r.Tenant, 0) + " in " + what
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s %sd\n", what, verb)
				return nil
			}}
		sub.Flags().StringVar(&tenant, "for-tenant", "", "only this tenant's work (admin key; a tenant key always acts on its own)")
		cmd.AddCommand(sub)
	}
	return cmd
}
