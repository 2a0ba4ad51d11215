package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newMigrateCmd() *cobra.Command {
	var db string
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Bring the database schema to the newest version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			url := resolveDatabase(db)
			st, err := openStore(cmd.Context(), url)
			if err != nil {
				return err
			}
			defer st.Close()
			if err := st.Migrate(cmd.Context()); err != nil {
				return fmt.Errorf("migrate: %w", err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), "schema is up to date")
			return nil
		},
	}
	databaseFlag(cmd, &db)
	return cmd
}
