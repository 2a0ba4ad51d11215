package cli

import (
	"context"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/idem-dev/idem/idemtype"
)

// completeStates completes --state with the job states.
func completeStates(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	out := make([]string, len(idemtype.AllStates))
	for i, s := range idemtype.AllStates {
		out[i] = string(s)
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeQueues completes --queue with the queues the server knows (from
// /v1/stats), or nothing when it cannot be reached within two seconds.
func completeQueues(af *apiFlags) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
		cl, err := af.client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		st, err := cl.Stats(ctx)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for q := range st.Queues {
			out = append(out, q)
		}
		slices.Sort(out)
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// registerListCompletions adds value completion to the list flags of cmd.
func registerListCompletions(cmd *cobra.Command, af *apiFlags) {
	if cmd.Flags().Lookup("state") != nil {
		_ = cmd.RegisterFlagCompletionFunc("state", completeStates)
	}
	_ = cmd.RegisterFlagCompletionFunc("queue", completeQueues(af))
}
