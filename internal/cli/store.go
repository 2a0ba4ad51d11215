package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/pgstore"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// resolveDatabase returns the URL to use: the flag, else the environment,
// else the default SQLite file.
func resolveDatabase(flag string) string {
	if flag != "" {
		return flag
	}
	if env := os.Getenv(envDatabaseURL); env != "" {
		return env
	}
	return defaultDB
}

// isPostgres reports whether url names a PostgreSQL database.
func isPostgres(url string) bool {
	return strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://")
}

// checkDatabase refuses a database setting that is neither a postgres://
// URL nor a SQLite path or file: URI: a URL of another scheme (a misspelt
// postgres://) or a keyword/value connection string ("host=…
// password=…"). Read as a SQLite path, either was quoted whole, password
// included, in errors and hints, or made a file of that name. The error
// names the scheme at most.
func checkDatabase(url string) error {
	if isPostgres(url) {
		return nil
	}
	if keywordDSN(url) {
		return errors.New("database: a keyword/value connection string (host=… password=…) is not supported: want postgres://user:password@host:port/db")
	}
	scheme, _, ok := strings.Cut(url, "://")
	if !ok || strings.EqualFold(scheme, "sqlite") || strings.EqualFold(scheme, "file") {
		return nil
	}
	if len(scheme) > 20 || strings.ContainsFunc(scheme, func(r rune) bool {
		return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '+' || r == '-' || r == '.')
	}) {
		scheme = "(not shown)"
	}
	return fmt.Errorf("database: unknown URL scheme %q: want postgres://… or a SQLite path (sqlite:PATH or PATH)", scheme)
}

// keywordDSN reports whether v looks like a keyword/value connection
// string: it sets a password.
func keywordDSN(v string) bool {
	return strings.Contains(strings.ToLower(v), "password=")
}

// sqlitePath returns the file of a SQLite URL.
func sqlitePath(url string) string {
	return strings.TrimPrefix(strings.TrimPrefix(url, "sqlite://"), "sqlite:")
}

// openOpts say what opening a store may do besides opening it.
type openOpts struct {
	// create allows creating a SQLite file that does not exist; without
	// it a missing file is an error (exit code 3) naming --create.
	create bool
	// noMigrate opens without migrating (PostgreSQL and SQLite alike).
	noMigrate bool
	// missingHint, when not "", replaces the hint of a missing SQLite file
	// (without create), which names a --create the command may not have.
	missingHint string
}

// errNoDatabase is returned when a SQLite file is missing and may not be created.
var errNoDatabase = errors.New("no database")

// openStore opens the store named by url and migrates it unless
// o.noMigrate; it creates a SQLite file only with o.create.
func openStore(ctx context.Context, url string, o openOpts) (store.Store, error) {
	if err := checkDatabase(url); err != nil {
		return nil, usageErr(err)
	}
	if isPostgres(url) {
		return openPostgresWith(ctx, url, o.noMigrate)
	}
	path, err := sqlitestore.FilePath(sqlitePath(url))
	if err != nil {
		return nil, usageErr(fmt.Errorf("database: %w", err))
	}
	if path == ":memory:" {
		// The store's writer and readers are separate connections, each
		// with its own empty in-memory database (and all gone at exit).
		return nil, withHint(usageErr(errors.New("database :memory:: an in-memory SQLite database is not shared by the store's connections and does not outlive the command")),
			"give the path of a SQLite file, e.g. --database ./idem.db")
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return nil, withHint(usageErr(fmt.Errorf("database %s is a directory: want the path of a SQLite file", path)),
			"name a file in it, e.g. --database "+filepath.Join(path, "idem.db"))
	}
	if dir := filepath.Dir(path); dir != "" {
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			return nil, withHint(fmt.Errorf("%w: the directory %s does not exist", errNoDatabase, dir),
				"create it first (mkdir -p "+dir+"), or pass another --database")
		}
	}
	if !o.create {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			hint := o.missingHint
			if hint == "" {
				hint = "pass --database or set " + envDatabaseURL + " to your database, or add --create to create " + path
			}
			return nil, withHint(fmt.Errorf("%w at %s", errNoDatabase, path), hint)
		}
	}
	st, err := sqlitestore.Open(ctx, path, &sqlitestore.Config{SkipMigrate: o.noMigrate})
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	return st, nil
}

// schemaVersion returns the applied and expected schema versions of st;
// a store with no schema yet reports applied 0.
func schemaVersion(ctx context.Context, st store.Store) (applied, expected int, ok bool) {
	sv, isSV := st.(interface {
		SchemaVersion(ctx context.Context) (int, int, error)
	})
	if !isSV {
		return 0, 0, false
	}
	applied, expected, err := sv.SchemaVersion(ctx)
	if err != nil {
		applied = 0 // no migrations table yet
	}
	return applied, expected, true
}

// envSchema names the PostgreSQL schema of idem's tables.
const envSchema = "IDEM_PG_SCHEMA"

func openPostgresWith(ctx context.Context, url string, skipMigrate bool) (*pgstore.Store, error) {
	schema := os.Getenv(envSchema)
	if schema != "" && !benchSchemaRE.MatchString(schema) { // before connecting: a setting, not the server
		return nil, usageErr(fmt.Errorf("%s %q: want a schema name: [a-z_][a-z0-9_]*, at most 63 characters", envSchema, schema))
	}
	st, err := pgstore.Open(ctx, url, &pgstore.Config{Schema: schema, SkipMigrate: skipMigrate})
	if err != nil {
		return nil, pgOpenErr(fmt.Errorf("open postgres: %w", err), url)
	}
	return st, nil
}

// pgOpenErr gives a failure to open the PostgreSQL database of url its
// exit code and hint: a database that does not exist (SQLSTATE 3D000) is
// not found (exit code 3) and the hint says how to create it; anything
// else is an error whose hint is to check the URL and the server.
func pgOpenErr(err error, url string) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "3D000" {
		name := "the database"
		if cfg, perr := pgconn.ParseConfig(url); perr == nil && cfg.Database != "" {
			name = pgx.Identifier{cfg.Database}.Sanitize()
		}
		return withHint(&exitError{code: ExitNotFound, err: err},
			"create it (CREATE DATABASE "+name+"; in psql, or createdb) or fix the database name at the end of the URL")
	}
	return withHint(err, "check the URL, that PostgreSQL runs and accepts this user")
}
