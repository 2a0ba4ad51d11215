package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/pgstore"
)

// benchSchemaRE is the schema names pgstore accepts.
var benchSchemaRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// benchDB is the database `idem bench` measures: its store and what to
// clean up afterwards.
type benchDB struct {
	st     store.Store
	schema string // PostgreSQL only
	// drop is set when bench created the schema and drops it at the end.
	drop    bool
	cleanup func()
	pool    *pgxpool.Pool // closed after the store, when bench made it
}

// close closes the store and drops the schema bench created.
func (d *benchDB) close(ctx context.Context, url string) error {
	err := d.st.Close()
	if d.pool != nil {
		d.pool.Close()
	}
	if d.drop {
		err = errors.Join(err, dropSchema(ctx, url, d.schema))
	}
	if d.cleanup != nil {
		d.cleanup()
	}
	return err
}

// benchSchema returns the PostgreSQL schema bench uses: --schema, else the
// first element of the URL's search_path (a search_path= parameter or
// options=-c search_path=…), else IDEM_PG_SCHEMA, else "" (a fresh one).
func benchSchema(url, flag string) (string, error) {
	name := flag
	if name == "" {
		sp, err := urlSearchPath(url)
		if err != nil {
			return "", err
		}
		name = sp
	}
	if name == "" {
		name = os.Getenv(envSchema)
	}
	if name != "" && !benchSchemaRE.MatchString(name) {
		return "", usageErr(fmt.Errorf("schema %q: want [a-z_][a-z0-9_]*", name))
	}
	return name, nil
}

// urlSearchPath returns the first schema of the search_path a PostgreSQL
// URL sets, or "".
func urlSearchPath(url string) (string, error) {
	pcfg, err := pgstore.PoolConfig(url) // errors never quote the password
	if err != nil {
		return "", usageErr(fmt.Errorf("database url: %w", err))
	}
	cfg := pcfg.ConnConfig
	sp := cfg.RuntimeParams["search_path"]
	if sp == "" {
		// options=-c search_path=a,b (or -csearch_path=…)
		for f := range strings.FieldsSeq(strings.ReplaceAll(cfg.RuntimeParams["options"], "-c", " ")) {
			if v, ok := strings.CutPrefix(f, "search_path="); ok {
				sp = v
			}
		}
	}
	first, _, _ := strings.Cut(sp, ",")
	return strings.Trim(strings.TrimSpace(first), `"`), nil
}

// openBenchDB opens the store bench measures. SQLite without a URL: a
// fresh file in a temp directory (removed unless keep). PostgreSQL: the
// schema of benchSchema, created when missing; without one a fresh schema
// idem_bench_<pid>_<time>. A schema bench created is dropped at the end
// unless keep; a given schema that already exists is kept.
func openBenchDB(ctx context.Context, url, schemaFlag string, keep bool) (*benchDB, string, error) {
	return openBenchDBTraced(ctx, url, schemaFlag, keep, nil)
}

// openBenchDBTraced is openBenchDB with tracer (when not nil) on every
// PostgreSQL connection of the store.
func openBenchDBTraced(ctx context.Context, url, schemaFlag string, keep bool, tracer pgx.QueryTracer) (*benchDB, string, error) {
	d := &benchDB{}
	if url == "" {
		dir, err := os.MkdirTemp("", "idem-bench-")
		if err != nil {
			return nil, "", err
		}
		if !keep {
			d.cleanup = func() { _ = os.RemoveAll(dir) }
		}
		url = dir + "/bench.db"
	}
	if !isPostgres(url) {
		if schemaFlag != "" {
			return nil, "", usageErr(errors.New("--schema is for PostgreSQL only"))
		}
		st, err := openStore(ctx, url, openOpts{create: true})
		if err != nil {
			if d.cleanup != nil {
				d.cleanup()
			}
			return nil, "", err
		}
		d.st = st
		return d, url, nil
	}
	schema, err := benchSchema(url, schemaFlag)
	if err != nil {
		return nil, "", err
	}
	if schema == "" {
		schema = fmt.Sprintf("idem_bench_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9)
	}
	existed, err := schemaExists(ctx, url, schema)
	if err != nil {
		return nil, "", pgOpenErr(err, url)
	}
	d.schema, d.drop = schema, !existed && !keep
	st, err := openTracedPG(ctx, d, url, schema, tracer)
	if err != nil {
		if d.drop {
			_ = dropSchema(ctx, url, schema)
		}
		return nil, "", pgOpenErr(fmt.Errorf("open postgres: %w", err), url)
	}
	d.st = st
	return d, url, nil
}

// refuseUsed returns an error when the database already holds jobs: their
// workers, keys and latencies would mix with the measurement.
func refuseUsed(ctx context.Context, c *idem.Client, d *benchDB, url string) error {
	jobs, _, err := c.JobList(ctx, &idem.JobListParams{Limit: 1})
	if err != nil {
		return fmt.Errorf("check for old jobs: %w", err)
	}
	if len(jobs) == 0 {
		return nil
	}
	where := sqlitePath(url)
	hint := "run without --database for a fresh temp file, or remove " + where
	if d.schema != "" {
		where = "schema " + d.schema
		hint = "omit --schema (and search_path) for a fresh schema, or drop it: DROP SCHEMA " + d.schema + " CASCADE"
	}
	return usageErr(withHint(fmt.Errorf("%s already holds jobs; bench measures an empty database", where), hint))
}

// schemaExists reports whether the schema exists.
func schemaExists(ctx context.Context, url, schema string) (bool, error) {
	conn, err := pgstore.Connect(ctx, url)
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema).Scan(&ok); err != nil {
		return false, fmt.Errorf("look up schema %s: %w", schema, err)
	}
	return ok, nil
}

// dropSchema drops the schema and everything in it.
func dropSchema(ctx context.Context, url, schema string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	conn, err := pgstore.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("drop schema %s: %w", schema, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		return fmt.Errorf("drop schema %s: %w", schema, err)
	}
	return nil
}

// openTracedPG opens the store on a pool of its own (pgstore.Open's size)
// whose connections carry tracer; without a tracer it is pgstore.Open.
func openTracedPG(ctx context.Context, d *benchDB, url, schema string, tracer pgx.QueryTracer) (*pgstore.Store, error) {
	if tracer == nil {
		return pgstore.Open(ctx, url, &pgstore.Config{Schema: schema})
	}
	cfg, err := pgstore.PoolConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	st, err := pgstore.New(ctx, pool, &pgstore.Config{Schema: schema})
	if err != nil {
		pool.Close()
		return nil, err
	}
	d.pool = pool
	return st, nil
}
