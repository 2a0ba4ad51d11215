package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/store"
)

func newAPIKeyCmd() *cobra.Command {
	var db string
	cmd := &cobra.Command{Use: "apikey", Short: "Create, list and revoke API keys (directly in the database)"}
	cmd.PersistentFlags().StringVar(&db, "database", "",
		"database URL: a SQLite path or postgres://… (env "+envDatabaseURL+", default "+defaultDB+")")
	var tenant, name string
	var admin bool
	create := &cobra.Command{Use: "create", Short: "Create a key; the secret is printed once", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := idem.ValidateName("tenant", tenant); err != nil {
				return err
			}
			st, err := openStore(cmd.Context(), resolveDatabase(db))
			if err != nil {
				return err
			}
			defer st.Close()
			secret, k := idemhttp.NewAPIKey(tenant, admin, name, time.Now())
			if err := st.APIKeyCreate(cmd.Context(), k); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "id:     %s\ntenant: %s\nadmin:  %t\nkey:    %s\n(the key is shown only once)\n", k.ID, k.Tenant, k.Admin, secret)
			return nil
		}}
	create.Flags().StringVar(&tenant, "tenant", idem.DefaultTenant, "the tenant the key acts in")
	create.Flags().BoolVar(&admin, "admin", false, "admin scope: may act for any tenant with Idem-Tenant")
	create.Flags().StringVar(&name, "name", "", "a label")
	list := &cobra.Command{Use: "list", Short: "List keys (revoked included)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := openStore(cmd.Context(), resolveDatabase(db))
			if err != nil {
				return err
			}
			defer st.Close()
			keys, err := st.APIKeyList(cmd.Context())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tTENANT\tADMIN\tNAME\tCREATED\tREVOKED")
			for _, k := range keys {
				fmt.Fprintf(tw, "%s\t%s\t%t\t%s\t%s\t%s\n", k.ID, k.Tenant, k.Admin, dash(k.Name), fmtTime(&k.CreatedAt), fmtTime(k.RevokedAt))
			}
			return tw.Flush()
		}}
	revoke := &cobra.Command{Use: "revoke ID", Short: "Revoke a key", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := openStore(cmd.Context(), resolveDatabase(db))
			if err != nil {
				return err
			}
			defer st.Close()
			if err := st.APIKeyRevoke(cmd.Context(), &store.APIKeyRevokeParams{ID: args[0], Now: time.Now()}); err != nil {
				return fmt.Errorf("revoke %s: %w", args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "revoked %s\n", args[0])
			return nil
		}}
	cmd.AddCommand(create, list, revoke)
	return cmd
}
