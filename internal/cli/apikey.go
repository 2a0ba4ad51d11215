package cli

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/store"
)

// apiKeyJSON is one key as `idem apikey … --json` prints it (never the hash).
type apiKeyJSON struct {
	ID        string     `json:"id"`
	Tenant    string     `json:"tenant"`
	Admin     bool       `json:"admin"`
	Name      string     `json:"name,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	Key       string     `json:"key,omitempty"` // the secret, only at creation
}

func newAPIKeyCmd() *cobra.Command {
	var db string
	var create bool
	cmd := &cobra.Command{Use: "apikey", Short: "Create, list and revoke API keys (directly in the database)",
		Long: `Works on the database directly. It never creates a database unless --create
is given: a missing SQLite file is an error (exit code 3). It migrates only a
database without a schema yet: a schema behind this binary is left to
` + "`idem migrate`" + ` (migrating it would make nodes of the older version unready).`}
	cmd.PersistentFlags().StringVar(&db, "database", "",
		"database URL: a SQLite path or postgres://… (env "+envDatabaseURL+", default "+defaultDB+")")
	cmd.PersistentFlags().BoolVar(&create, "create", false, "create the SQLite database when it does not exist")
	open := func(ctx context.Context) (store.Store, error) {
		return openUnmigrated(ctx, resolveDatabase(db), create)
	}
	cmd.AddCommand(newAPIKeyCreateCmd(open), newAPIKeyListCmd(open), newAPIKeyRevokeCmd(open))
	return cmd
}

// openUnmigrated opens url for commands that only read or write rows: a
// database without any schema yet is migrated, any other is left at its
// version (the nodes serving it expect that one; upgrades migrate
// explicitly with `idem migrate`).
func openUnmigrated(ctx context.Context, url string, create bool) (store.Store, error) {
	st, err := openStore(ctx, url, openOpts{create: create, noMigrate: true})
	if err != nil {
		return nil, err
	}
	if applied, _, ok := schemaVersion(ctx, st); ok && applied > 0 {
		return st, nil
	}
	if err := st.Migrate(ctx); err != nil {
		st.Close()
		return nil, fmt.Errorf("migrate a new database: %w", err)
	}
	return st, nil
}

func newAPIKeyCreateCmd(open func(context.Context) (store.Store, error)) *cobra.Command {
	var tenant, name string
	var admin bool
	create := &cobra.Command{Use: "create", Short: "Create a key; the secret is printed once", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := idem.ValidateName("tenant", tenant); err != nil {
				return usageErr(err)
			}
			if tenant == idem.EveryTenant {
				return usageErr(fmt.Errorf("tenant %q is reserved for default limits", idem.EveryTenant))
			}
			st, err := open(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			secret, k := idemhttp.NewAPIKey(tenant, admin, name, time.Now())
			if err := st.APIKeyCreate(cmd.Context(), k); err != nil {
				return fmt.Errorf("create api key: %w", err)
			}
			if wantJSON(cmd) {
				return printJSON(cmd.OutOrStdout(), keyJSON(k, secret))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "id:     %s\ntenant: %s\nadmin:  %t\nkey:    %s\n(the key is shown only once)\n", k.ID, k.Tenant, k.Admin, secret)
			return nil
		}}
	create.Flags().StringVar(&tenant, "tenant", idem.DefaultTenant, "the tenant the key acts in")
	create.Flags().BoolVar(&admin, "admin", false, "admin scope: may act for any tenant with Idem-Tenant")
	create.Flags().StringVar(&name, "name", "", "a label")
	return create
}

func newAPIKeyListCmd(open func(context.Context) (store.Store, error)) *cobra.Command {
	return &cobra.Command{Use: "list", Short: "List keys (revoked included)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := open(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			keys, err := st.APIKeyList(cmd.Context())
			if err != nil {
				return fmt.Errorf("list api keys: %w", err)
			}
			if wantJSON(cmd) {
				out := make([]apiKeyJSON, len(keys))
				for i, k := range keys {
					out[i] = keyJSON(k, "")
				}
				return printJSON(cmd.OutOrStdout(), map[string]any{"keys": out})
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tTENANT\tADMIN\tNAME\tCREATED\tREVOKED")
			for _, k := range keys {
				fmt.Fprintf(tw, "%s\t%s\t%t\t%s\t%s\t%s\n", cell(k.ID, 0), cell(k.Tenant, 0), k.Admin, dash(cell(k.Name, 0)), fmtTime(&k.CreatedAt), fmtTime(k.RevokedAt))
			}
			return tw.Flush()
		}}
}

func newAPIKeyRevokeCmd(open func(context.Context) (store.Store, error)) *cobra.Command {
	return &cobra.Command{Use: "revoke ID", Short: "Revoke a key", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := open(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			if err := st.APIKeyRevoke(cmd.Context(), &store.APIKeyRevokeParams{ID: args[0], Now: time.Now()}); err != nil {
				return fmt.Errorf("revoke %s: %w", args[0], err)
			}
			if wantJSON(cmd) {
				return printJSON(cmd.OutOrStdout(), map[string]string{"revoked": args[0]})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "revoked %s\n", args[0])
			return nil
		}}
}

func keyJSON(k *store.APIKey, secret string) apiKeyJSON {
	return apiKeyJSON{ID: k.ID, Tenant: k.Tenant, Admin: k.Admin, Name: k.Name, CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt, Key: secret}
}
