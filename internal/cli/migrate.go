package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/idem-dev/idem/store/pgstore"
)

func newMigrateCmd() *cobra.Command {
	var db string
	var create bool
	cmd := &cobra.Command{
		Use:   "migrate [up|down [N]|status]",
		Short: "Migrate the database schema (default: up to the newest version)",
		Long: `up brings the schema to the newest version (safe from several nodes at once)
and says which versions it applied; down N rolls back N versions and status
lists versions (PostgreSQL only; the PostgreSQL schema name comes from
IDEM_PG_SCHEMA, default "idem"). status and down only read a schema that
does not exist: they say so and create nothing. On a schema a newer idem
migrated, status lists the versions this binary does not know and exits 4,
as up does; down exits 4 on a schema with any version this binary does not
know (newer, or below its newest: another build applied it) and rolls back
nothing. A missing SQLite file is created only with --create.`,
		Args: cobra.RangeArgs(0, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			action := "up"
			if len(args) > 0 {
				action = args[0]
			}
			if (action == "up" || action == "status") && len(args) > 1 {
				// Not ignored: `migrate up 1` read as "one version up"
				// applied every pending one.
				return usageErr(fmt.Errorf("migrate %s takes no argument, got %q: up applies every pending version, "+
					"status lists them (only `migrate down N` takes a count)", action, args[1]))
			}
			return runMigrate(cmd, resolveDatabase(db), action, args, create)
		},
	}
	databaseFlag(cmd, &db)
	cmd.Flags().BoolVar(&create, "create", false, "create the SQLite database when it does not exist")
	return cmd
}

// migrateResult is what `idem migrate up` reports.
type migrateResult struct {
	From    int   `json:"from_version"`
	To      int   `json:"to_version"`
	Applied []int `json:"applied"`
}

func runMigrate(cmd *cobra.Command, url, action string, args []string, create bool) error {
	ctx, out := cmd.Context(), cmd.OutOrStdout()
	switch action {
	case "up":
		return migrateUp(ctx, cmd, url, create)
	case "status", "down":
	default:
		return usageErr(fmt.Errorf("migrate: unknown action %q (up, down, status)", action))
	}
	if !isPostgres(url) {
		return usageErr(errors.New("migrate down and status are for PostgreSQL; the SQLite store migrates with `idem migrate` or at open"))
	}
	steps := 1
	if action == "down" && len(args) == 2 {
		n, err := strconv.Atoi(args[1])
		if err != nil || n < 1 {
			return usageErr(fmt.Errorf("migrate down: %q is not a positive number", args[1]))
		}
		steps = n
	}
	st, err := openPostgresWith(ctx, url, true)
	if err != nil {
		return err
	}
	defer st.Close()
	exists, err := st.SchemaExists(ctx)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", action, err)
	}
	if !exists {
		// Only read: neither status nor down creates a schema (a
		// misspelt IDEM_PG_SCHEMA would otherwise leave one behind).
		fmt.Fprintf(cmd.ErrOrStderr(), "schema %q does not exist: no version applied (`idem migrate` creates it)\n", st.Schema())
	}
	if action == "status" {
		return printMigrationStatus(cmd, out, st, exists)
	}
	if !exists {
		if wantJSON(cmd) {
			return printJSON(out, map[string]int{"rolled_back": 0})
		}
		fmt.Fprintln(out, "rolled back 0 version(s)")
		return nil
	}
	before, err := appliedMigrations(ctx, st)
	if err != nil {
		return err
	}
	if err := st.MigrateDown(ctx, steps); err != nil {
		if errors.Is(err, pgstore.ErrSchemaNewer) {
			// Only the newer binary may undo its versions (exit 4).
			if to, expected, verr := st.SchemaVersion(ctx); verr == nil && to > expected {
				return schemaAhead(to, expected, ": nothing rolled back")
			}
			// A version below the newest that another build applied:
			// refused as the newer schema is (exit 4), named as it is.
			return unknownVersions(ctx, st, err)
		}
		return fmt.Errorf("migrate down: %w", err)
	}
	after, err := appliedMigrations(ctx, st)
	if err != nil {
		return err
	}
	// What was rolled back: fewer than asked when fewer were applied.
	done := before - after
	if wantJSON(cmd) {
		return printJSON(out, map[string]int{"rolled_back": done})
	}
	fmt.Fprintf(out, "rolled back %d version(s)\n", done)
	return nil
}

// appliedMigrations counts the migrations applied to the schema.
func appliedMigrations(ctx context.Context, st *pgstore.Store) (int, error) {
	status, err := st.MigrationStatus(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrate down: %w", err)
	}
	n := 0
	for _, m := range status {
		if m.Applied {
			n++
		}
	}
	return n, nil
}

// upMigrator is a store that reports what its migration applied
// (pgstore and sqlitestore).
type upMigrator interface {
	MigrateUp(ctx context.Context) (from int, applied []int, err error)
}

// migrateUp applies the pending migrations and reports the ones this run
// applied: run from several hosts at once, the runs that waited for
// another's migration report none.
func migrateUp(ctx context.Context, cmd *cobra.Command, url string, create bool) error {
	st, err := openStore(ctx, url, openOpts{create: create, noMigrate: true})
	if err != nil {
		return err
	}
	defer st.Close()
	res := migrateResult{Applied: []int{}}
	if um, ok := st.(upMigrator); ok {
		from, applied, err := um.MigrateUp(ctx)
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		res.From, res.Applied = from, append(res.Applied, applied...)
		res.To, _, _ = schemaVersion(ctx, st)
	} else {
		before, _, _ := schemaVersion(ctx, st)
		if err := st.Migrate(ctx); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		after, _, _ := schemaVersion(ctx, st)
		res.From, res.To = before, after
		for v := before + 1; v <= after; v++ {
			res.Applied = append(res.Applied, v)
		}
	}
	if to, expected, ok := schemaVersion(ctx, st); ok && to > expected {
		// This binary knows no migration past expected: it applied
		// nothing, and its nodes stay unready on this schema.
		return schemaAhead(to, expected, ": nothing applied")
	}
	out := cmd.OutOrStdout()
	if wantJSON(cmd) {
		return printJSON(out, res)
	}
	if len(res.Applied) == 0 {
		fmt.Fprintf(out, "schema is up to date at version %d; nothing applied\n", res.To)
		return nil
	}
	fmt.Fprintf(out, "applied %d migration(s): version %d to %d; schema is now at version %d\n", len(res.Applied), res.From, res.Applied[len(res.Applied)-1], res.To)
	return nil
}

// schemaAhead is the error (exit 4) of a migrate command on a schema at
// version to, newer than this binary's expected; more ends its text.
func schemaAhead(to, expected int, more string) error {
	return withHint(&exitError{code: ExitConflict, err: fmt.Errorf(
		"schema is at version %d, newer than this binary's %d (a newer idem migrated it)%s", to, expected, more)},
		fmt.Sprintf("run the newer idem; to go back to this binary, `idem migrate down %d` with the newer one first", to-expected))
}

// unknownVersions is the error (exit 4) of `idem migrate down` refused
// (err, pgstore.ErrSchemaNewer) for versions applied to the schema that
// this binary does not know, below its newest: another build of idem
// applied them (a number this one skips).
func unknownVersions(ctx context.Context, st *pgstore.Store, err error) error {
	var vs []string
	if status, serr := st.MigrationStatus(ctx); serr == nil {
		for _, m := range status {
			if m.Unknown {
				vs = append(vs, fmt.Sprintf("%d (%s)", m.Version, m.Name))
			}
		}
	}
	if len(vs) == 0 { // gone since: say what MigrateDown said
		return &exitError{code: ExitConflict, err: fmt.Errorf("migrate down: %w", err)}
	}
	return withHint(&exitError{code: ExitConflict, err: fmt.Errorf(
		"the schema has version %s applied, which this binary does not know (another build of idem applied it): nothing rolled back",
		strings.Join(vs, ", version "))},
		"only the idem that applied it can undo it; `idem migrate status` lists it as unknown to this binary")
}

// migrationJSON is one line of `idem migrate status --json`.
type migrationJSON struct {
	Version   int    `json:"version"`
	Name      string `json:"name"`
	Applied   bool   `json:"applied"`
	AppliedAt string `json:"applied_at,omitempty"`
	Unknown   bool   `json:"unknown,omitempty"` // applied by a newer binary
}

// printMigrationStatus prints every version, applied or pending, and those
// a newer binary applied ("unknown to this binary"), which make it fail
// with exit 4 as `idem migrate` does on such a schema; exists says whether
// the schema exists (in --json, schema_exists).
func printMigrationStatus(cmd *cobra.Command, out io.Writer, st *pgstore.Store, exists bool) error {
	status, err := st.MigrationStatus(cmd.Context())
	if err != nil {
		return fmt.Errorf("migrate status: %w", err)
	}
	newest, known := 0, 0
	for _, m := range status {
		if m.Applied {
			newest = max(newest, m.Version)
		}
		if !m.Unknown {
			known = max(known, m.Version)
		}
	}
	var ahead error
	if newest > known {
		ahead = schemaAhead(newest, known, "")
	}
	if wantJSON(cmd) {
		list := make([]migrationJSON, len(status))
		for i, m := range status {
			list[i] = migrationJSON{Version: m.Version, Name: m.Name, Applied: m.Applied, Unknown: m.Unknown}
			if m.AppliedAt != nil {
				list[i].AppliedAt = m.AppliedAt.UTC().Format("2006-01-02T15:04:05Z")
			}
		}
		if err := printJSON(out, map[string]any{"schema": st.Schema(), "schema_exists": exists, "migrations": list}); err != nil {
			return err
		}
		return ahead
	}
	fmt.Fprintf(out, "%-8s %-28s %s\n", "VERSION", "NAME", "APPLIED")
	for _, m := range status {
		applied := "pending"
		if m.Applied && m.AppliedAt != nil {
			applied = m.AppliedAt.UTC().Format("2006-01-02 15:04:05Z")
		}
		if m.Unknown {
			applied += " (unknown to this binary)"
		}
		fmt.Fprintf(out, "%-8d %-28s %s\n", m.Version, m.Name, applied)
	}
	return ahead
}
