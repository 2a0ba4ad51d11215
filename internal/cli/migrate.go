package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/idem-dev/idem/store/pgstore"
)

func newMigrateCmd() *cobra.Command {
	var db string
	cmd := &cobra.Command{
		Use:   "migrate [up|down [N]|status]",
		Short: "Migrate the database schema (default: up to the newest version)",
		Long: `up brings the schema to the newest version (safe from several nodes at once);
down N rolls back N versions and status lists versions (PostgreSQL only; the
PostgreSQL schema name comes from IDEM_PG_SCHEMA, default "idem").`,
		Args: cobra.RangeArgs(0, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			action := "up"
			if len(args) > 0 {
				action = args[0]
			}
			return runMigrate(cmd, resolveDatabase(db), action, args)
		},
	}
	databaseFlag(cmd, &db)
	return cmd
}

func runMigrate(cmd *cobra.Command, url, action string, args []string) error {
	ctx, out := cmd.Context(), cmd.OutOrStdout()
	if action == "up" {
		st, err := openStore(ctx, url)
		if err != nil {
			return err
		}
		defer st.Close()
		if err := st.Migrate(ctx); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		fmt.Fprintln(out, "schema is up to date")
		return nil
	}
	if !isPostgres(url) {
		return errors.New("migrate down and status are for PostgreSQL; the SQLite store migrates itself on open")
	}
	st, err := openPostgresWith(ctx, url, true)
	if err != nil {
		return err
	}
	defer st.Close()
	switch action {
	case "status":
		return printMigrationStatus(cmd, out, st)
	case "down":
		steps := 1
		if len(args) == 2 {
			if _, err := fmt.Sscan(args[1], &steps); err != nil || steps < 1 {
				return fmt.Errorf("migrate down: %q is not a positive number", args[1])
			}
		}
		if err := st.MigrateDown(ctx, steps); err != nil {
			return fmt.Errorf("migrate down: %w", err)
		}
		fmt.Fprintf(out, "rolled back %d version(s)\n", steps)
		return nil
	}
	return fmt.Errorf("migrate: unknown action %q (up, down, status)", action)
}

func printMigrationStatus(cmd *cobra.Command, out io.Writer, st *pgstore.Store) error {
	status, err := st.MigrationStatus(cmd.Context())
	if err != nil {
		return fmt.Errorf("migrate status: %w", err)
	}
	fmt.Fprintf(out, "%-8s %-28s %s\n", "VERSION", "NAME", "APPLIED")
	for _, m := range status {
		applied := "pending"
		if m.Applied && m.AppliedAt != nil {
			applied = m.AppliedAt.UTC().Format("2006-01-02 15:04:05Z")
		}
		fmt.Fprintf(out, "%-8d %-28s %s\n", m.Version, m.Name, applied)
	}
	return nil
}
