package cli

import (
	"fmt"
	"slices"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func newStatsCmd() *cobra.Command {
	var af apiFlags
	cmd := &cobra.Command{Use: "stats", Short: "Show queue and idempotency statistics over the HTTP API", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := af.client()
			if err != nil {
				return err
			}
			st, err := cl.Stats(cmd.Context())
			if err != nil {
				return err
			}
			if wantJSON(cmd) {
				return printJSON(cmd.OutOrStdout(), st)
			}
			w := cmd.OutOrStdout()
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "QUEUE\tAVAILABLE\tSCHEDULED\tRUNNING\tRETRYABLE\tPENDING\tCOMPLETED\tDEAD\tCANCELLED\tOLDEST(s)\tOK/1m\tFAIL/1m\tWAIT p99(ms)\tRUN p99(ms)\t")
			names := make([]string, 0, len(st.Queues))
			for n := range st.Queues {
				names = append(names, n)
			}
			slices.Sort(names)
			for _, n := range names {
				q := st.Queues[n]
				c := q.Counts
				fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.0f\t%d\t%d\t%.1f\t%.1f\t\n", cell(n, 0), c["available"], c["scheduled"],
					c["running"], c["retryable"], c["pending"], c["completed"], c["dead"], c["cancelled"],
					q.OldestAvailableAgeS, q.Completed1m, q.Failed1m, q.WaitMS.P99, q.RunMS.P99)
			}
			tw.Flush()
			if i := st.Idempotency; i != nil {
				fmt.Fprintf(w, "\nidempotency: %d entries (%d in progress), %d expiring in 24h, %d expired, %d bytes; hits %d, misses %d, hit rate %.1f%%\n",
					i.Entries, i.InProgress, i.Expiring24h, i.Expired, i.SizeBytes, i.Hits, i.Misses, 100*i.HitRate)
			}
			if len(st.Limits) > 0 {
				fmt.Fprintln(w, "\nlimits:")
				printLimits(w, st.Limits)
			}
			for _, p := range st.Paused {
				fmt.Fprintf(w, "paused: queue %s tenant %s\n", cell(p.Queue, 0), orAll(cell(p.Tenant, 0)))
			}
			return nil
		}}
	af.register(cmd)
	return cmd
}
