package cli

import (
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/idem-dev/idem/idemclient"
)

// scopeFlags name the scope of a limit: --tenant, --queue or both.
type scopeFlags struct{ tenant, queue string }

func (f *scopeFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.tenant, "for-tenant", "", "the tenant the limit applies to (with --for-queue: only its work in that queue); '*': the default of every tenant without its own limit, each with its own budget")
	cmd.Flags().StringVar(&f.queue, "for-queue", "", "the queue the limit applies to (alone: every tenant's work in it)")
}

func (f *scopeFlags) scope() (idemclient.LimitScope, error) {
	if f.tenant == "" && f.queue == "" {
		return idemclient.LimitScope{}, usageErr(errors.New("give --for-tenant, --for-queue or both"))
	}
	return idemclient.LimitScope{Tenant: f.tenant, Queue: f.queue}, nil
}

func newLimitsCmd() *cobra.Command {
	var af apiFlags
	cmd := &cobra.Command{Use: "limits", Short: "Rate and concurrency limits per tenant and queue, over the HTTP API"}
	af.register(cmd)
	list := &cobra.Command{Use: "list", Short: "List limits with their usage", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := af.client()
			if err != nil {
				return err
			}
			ls, err := cl.LimitList(cmd.Context())
			if err != nil {
				return err
			}
			if wantJSON(cmd) {
				return printJSON(cmd.OutOrStdout(), map[string]any{"limits": ls})
			}
			printLimits(cmd.OutOrStdout(), ls)
			return nil
		}}
	var sf scopeFlags
	var rate string
	var conc, weight int
	set := &cobra.Command{Use: "set", Short: "Set a limit (admin key), e.g. --for-tenant acme --rate 100/1m", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			scope, err := sf.scope()
			if err != nil {
				return err
			}
			var req idemclient.LimitRequest
			if rate != "" {
				req.Rate = &rate
			}
			if cmd.Flags().Changed("concurrency") {
				req.Concurrency = &conc
			}
			if cmd.Flags().Changed("weight") {
				req.Weight = &weight
			}
			if req.Rate == nil && req.Concurrency == nil && req.Weight == nil {
				return usageErr(errors.New("give --rate, --concurrency, --weight or a combination"))
			}
			cl, err := af.client()
			if err != nil {
				return err
			}
			l, err := cl.LimitPut(cmd.Context(), scope, req)
			if err != nil {
				return err
			}
			if wantJSON(cmd) {
				return printJSON(cmd.OutOrStdout(), l)
			}
			printLimits(cmd.OutOrStdout(), []idemclient.Limit{*l})
			return nil
		}}
	sf.register(set)
	set.Flags().StringVar(&rate, "rate", "", "jobs started per period, e.g. 100/1m")
	set.Flags().IntVar(&conc, "concurrency", 0, "most jobs running at once")
	set.Flags().IntVar(&weight, "weight", 0, "the tenant's share of claims relative to others (default 1)")
	var df scopeFlags
	del := &cobra.Command{Use: "delete", Short: "Remove a limit (admin key)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			scope, err := df.scope()
			if err != nil {
				return err
			}
			cl, err := af.client()
			if err != nil {
				return err
			}
			if err := cl.LimitDelete(cmd.Context(), scope); err != nil {
				return err
			}
			if wantJSON(cmd) {
				return printJSON(cmd.OutOrStdout(), map[string]any{"deleted": true})
			}
			fmt.Fprintln(cmd.OutOrStdout(), "limit deleted")
			return nil
		}}
	df.register(del)
	cmd.AddCommand(list, set, del)
	return cmd
}

// printLimits writes limits as a table.
func printLimits(w io.Writer, ls []idemclient.Limit) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tQUEUE\tRATE\tCONCURRENCY\tWEIGHT\tRUNNING\tUSED IN WINDOW\tTHROTTLED")
	for _, l := range ls {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\n", orAll(cell(l.Tenant, 0)), orAll(cell(l.Queue, 0)), orDash(cell(l.Rate, 0)),
			orDash(itoaNZ(l.Concurrency)), orDash(itoaNZ(l.Weight)), l.Usage.Running, l.Usage.WindowUsed, l.Usage.Throttled)
	}
	tw.Flush()
}

// orAll names an empty scope part: every tenant (or queue) together. It is
// not "*", the tenant of default limits (each tenant its own budget).
func orAll(s string) string {
	if s == "" {
		return "(all)"
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func itoaNZ(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprint(n)
}
