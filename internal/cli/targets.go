package cli

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/idem-dev/idem/idemclient"
)

// newTargetsCmd manages webhook delivery targets over the HTTP API.
func newTargetsCmd() *cobra.Command {
	var af apiFlags
	cmd := &cobra.Command{Use: "targets", Short: "Manage webhook delivery targets over the HTTP API"}
	af.register(cmd)
	list := &cobra.Command{Use: "list", Short: "List targets (secrets are never shown)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := af.client()
			if err != nil {
				return err
			}
			ts, err := cl.Targets(cmd.Context())
			if err != nil {
				return err
			}
			if wantJSON(cmd) {
				return printJSON(cmd.OutOrStdout(), ts)
			}
			printTargets(cmd.OutOrStdout(), ts)
			return nil
		}}
	var put idemclient.TargetPut
	var secrets []string
	var unsigned bool
	var timeout string
	putCmd := &cobra.Command{Use: "put NAME", Short: "Create or replace a target; a generated secret is printed once",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := af.client()
			if err != nil {
				return err
			}
			req := put
			switch {
			case unsigned && len(secrets) > 0:
				return usageErr(errors.New("--unsigned and --secret contradict each other"))
			case unsigned:
				// An empty list, not a nil one: null would mean "generate a secret".
				req.Secrets = &[]string{}
			case len(secrets) > 0:
				req.Secrets = &secrets
			}
			if timeout != "" {
				req.Timeout = &timeout
			}
			t, created, err := cl.PutTarget(cmd.Context(), args[0], &req)
			if err != nil {
				return err
			}
			if wantJSON(cmd) {
				return printJSON(cmd.OutOrStdout(), t)
			}
			verb := "replaced"
			if created {
				verb = "created"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s target %s\n", verb, cell(t.Name, 0))
			if t.Secret != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "signing secret (shown only once): %s\n", cell(t.Secret, 0))
			}
			return nil
		}}
	pf := putCmd.Flags()
	pf.StringVar(&put.URL, "target-url", "", "the webhook URL (required)")
	pf.StringVar(&put.Queue, "queue", "", "deliver the jobs of this queue")
	pf.StringVar(&put.Kind, "kind", "", "deliver the jobs of this kind")
	pf.StringArrayVar(&secrets, "secret", nil, "signing secret whsec_… (repeat while rotating; default: generated for a new target, kept for an existing one)")
	pf.BoolVar(&unsigned, "unsigned", false, "send pushes without a signature")
	pf.StringVar(&timeout, "timeout", "", "timeout of one push, e.g. 10s")
	_ = putCmd.MarkFlagRequired("target-url")
	del := &cobra.Command{Use: "delete NAME", Short: "Delete a target", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := af.client()
			if err != nil {
				return err
			}
			if err := cl.DeleteTarget(cmd.Context(), args[0]); err != nil {
				return err
			}
			if wantJSON(cmd) {
				return printJSON(cmd.OutOrStdout(), map[string]string{"deleted": args[0]})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted target %s\n", args[0])
			return nil
		}}
	stats := &cobra.Command{Use: "stats", Short: "Success rate and latency per target over the last hour", Args: cobra.NoArgs,
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
				if st.Targets == nil {
					// The API leaves an empty map out: print {}, not null.
					return printJSON(cmd.OutOrStdout(), map[string]any{})
				}
				return printJSON(cmd.OutOrStdout(), st.Targets)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TARGET	ATTEMPTS	OK	RETRY	DEAD	SUCCESS	P50 MS	P95 MS	P99 MS")
			for _, name := range slices.Sorted(maps.Keys(st.Targets)) {
				t := st.Targets[name]
				fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.1f%%\t%.0f\t%.0f\t%.0f\n", cell(name, 0), t.Attempts, t.Completed, t.Retried,
					t.Dead, 100*t.SuccessRate, t.LatencyMS.P50, t.LatencyMS.P95, t.LatencyMS.P99)
			}
			return tw.Flush()
		}}
	cmd.AddCommand(list, putCmd, del, stats)
	return cmd
}

// printTargets prints targets as a table.
func printTargets(w io.Writer, ts []*idemclient.Target) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tQUEUE\tKIND\tURL\tSECRETS\tTIMEOUT")
	for _, t := range ts {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", cell(t.Name, 0), dash(cell(t.Queue, 0)), dash(cell(t.Kind, 0)), cell(t.URL, 0),
			t.SecretCount, dash(cell(t.Timeout, 0)))
	}
	tw.Flush()
}
