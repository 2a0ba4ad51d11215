package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/ui"
)

// Environment variables and defaults of `idem serve`.
const (
	envListen          = "IDEM_LISTEN"
	envOpsListen       = "IDEM_OPS_LISTEN"
	envLogLevel        = "IDEM_LOG_LEVEL"
	envLogFormat       = "IDEM_LOG_FORMAT"
	defaultListen      = "127.0.0.1:8080"
	defaultShutdownTTL = 30 * time.Second
)

func newServeCmd() *cobra.Command {
	var configPath string
	var printCfg bool
	var deliv deliveryFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the HTTP API server",
		Long: `Serves the HTTP API v1 (/v1/...), /healthz, /readyz, /metrics, the
authenticated /v1/health and the dashboard at /ui/ (docs/dashboard.md), and
runs the maintenance services (lease rescuer, promoter, retention, schedules)
on the elected leader.

With no flags: SQLite at ./idem.db, listening on 127.0.0.1:8080. On the first
start (no API key in the database) an admin API key is created and printed
once, after the listeners are bound.

Configuration, later wins: defaults, the TOML file of --config (env
IDEM_CONFIG; docs/idem.example.toml documents every key), IDEM_* variables
(IDEM_<KEY> with dots as underscores: IDEM_LOG_LEVEL, IDEM_JOBS_LEASE,
IDEM_HEALTH_DEAD_JOBS; IDEM_DATABASE_URL for database), then flags. An
unknown key or a bad value stops start-up naming it (exit code 2). Durations
take Go syntax (90s, 1h30m) or integer seconds. --print-config prints the
effective configuration (database password masked) and exits.

SIGTERM or SIGINT: stop accepting connections, finish in-flight requests (up
to shutdown_timeout, every listener at once), then stop the runtime gracefully
(up to shutdown_timeout again: allow twice it before a SIGKILL); exit code 0,
or 1 when stopping failed (leases that could not be released, cache counts not
flushed).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := configPath
			if path == "" {
				path = os.Getenv(envConfig)
			}
			cfg, err := loadConfig(path, os.Environ(), cmd.Flags())
			if err != nil {
				return err
			}
			if wantJSON(cmd) && !cfg.logFormatSet {
				// --json: every line JSON unless the format was chosen
				// (in the file, IDEM_LOG_FORMAT or --log-format).
				cfg.Log.Format = "json"
			}
			cfg.jsonOut = wantJSON(cmd)
			cfg.delivery = deliv
			if printCfg && cfg.jsonOut {
				m, err := configMap(cfg)
				if err != nil {
					return err
				}
				return printJSON(cmd.OutOrStdout(), m)
			}
			if printCfg {
				out, err := printConfig(cfg)
				if err != nil {
					return err
				}
				_, err = fmt.Fprint(cmd.OutOrStdout(), out)
				return err
			}
			return runServe(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), cfg)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&configPath, "config", "", "TOML configuration file (env "+envConfig+")")
	fl.BoolVar(&printCfg, "print-config", false, "print the effective configuration (secrets masked) and exit")
	fl.String("database", "", "database URL: a SQLite path (sqlite:PATH or PATH) or postgres://… (env "+envDatabaseURL+", default "+defaultDB+")")
	fl.String("listen", "", "API listen address (env IDEM_LISTEN, default "+defaultListen+")")
	fl.String("ops-listen", "", "serve /healthz, /readyz and /metrics on this address instead (env IDEM_OPS_LISTEN)")
	fl.String("log-level", "", "debug, info, warn or error (env IDEM_LOG_LEVEL, default info)")
	fl.String("log-format", "", "text or json (env IDEM_LOG_FORMAT, default text)")
	fl.Bool("no-migrate", false, "do not migrate the schema at start (run idem migrate as a separate step); /readyz answers 503 until the schema is current")
	fl.String("shutdown-timeout", "", "how long in-flight requests and jobs get at shutdown (env IDEM_SHUTDOWN_TIMEOUT, default 30s)")
	_ = cmd.RegisterFlagCompletionFunc("log-level", cobra.FixedCompletions([]string{"debug", "info", "warn", "error"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("log-format", cobra.FixedCompletions([]string{"text", "json"}, cobra.ShellCompDirectiveNoFileComp))
	deliv.register(cmd)
	return cmd
}

// orEnv returns flag, else the environment variable, else def.
func orEnv(flag, env, def string) string {
	if flag != "" {
		return flag
	}
	if v := os.Getenv(env); v != "" {
		return v
	}
	return def
}

// newLogger builds the slog logger of the flags.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log format %q: want text or json", format)
}

func runServe(ctx context.Context, stdout, stderr io.Writer, cfg *ServeConfig) error {
	logger, err := newLogger(stderr, cfg.Log.Level, cfg.Log.Format)
	if err != nil {
		return usageErr(err)
	}
	// The delivery settings are checked before the store is opened: a
	// refused start creates and migrates no database.
	queues, err := cfg.delivery.config()
	if err != nil {
		return usageErr(err)
	}
	// Bind every listener before the database is opened: a busy port fails
	// start-up without creating or migrating a database (during an
	// upgrade, past what the older nodes expect) or minting an admin key.
	var listeners []*listener
	api, err := listen("api", cfg.Listen)
	if err != nil {
		return err
	}
	defer api.ln.Close()
	listeners = append(listeners, api)
	var ops *listener
	if cfg.OpsListen != "" {
		if ops, err = listen("ops", cfg.OpsListen); err != nil {
			return err
		}
		defer ops.ln.Close()
		listeners = append(listeners, ops)
	}
	url := cfg.Database
	// --no-migrate creates nothing: a SQLite file that does not exist is
	// not made empty (a later `idem migrate` without --create took it for
	// the database), it is refused as missing (exit 3).
	st, err := openStore(ctx, url, openOpts{create: !cfg.NoMigrate, noMigrate: cfg.NoMigrate,
		missingHint: "run `idem migrate --create` with the same --database first (--no-migrate neither creates nor migrates a database), or start without --no-migrate"})
	if err != nil {
		return err
	}
	defer st.Close()
	metrics := idemhttp.NewJobMetrics(cfg.HTTP.MetricsMaxLabels)
	obs := observers{metrics, jobLogger{logger}}
	var counters *idemhttp.CacheCounters
	if sc, ok := st.(store.Counters); ok {
		counters = idemhttp.NewCacheCounters(sc, 0, logger)
		obs = append(obs, counters)
	}
	client, err := idem.NewClient(st, cfg.clientConfig(&idem.Config{Logger: logger, Observer: obs, Queues: queues}))
	if err != nil {
		return usageErr(err)
	}
	server, err := idemhttp.NewServer(client, st, cfg.serverConfig(&idemhttp.Config{Logger: logger}))
	if err != nil {
		return usageErr(err)
	}
	if err := server.Registry().Register(metrics); err != nil {
		return fmt.Errorf("register job metrics: %w", err)
	}
	apiHandler := http.Handler(server)
	if ops != nil {
		apiHandler = server.APIHandler()
		ops.h = server.OpsHandler()
	}
	api.h = ui.Mount(apiHandler, &ui.Config{Logger: logger})
	applied, expected, versioned := schemaVersion(ctx, st)
	logger.Info("idem serve starting", "version", versionString(), "store", storeKind(url),
		"schema_version", applied, "schema_expected", expected, "no_migrate", cfg.NoMigrate)
	if err := ensureAdminKey(ctx, st, stdout, cfg.jsonOut); err != nil {
		if cfg.NoMigrate && versioned && applied == 0 {
			return noSchemaError(err)
		}
		return err
	}
	var g group
	g.add(signalActor(ctx))
	stopHTTP := &httpStop{grace: time.Duration(cfg.ShutdownTimeout), logger: logger}
	for _, l := range listeners {
		l.serve(&g, server, stdout, logger, stopHTTP, cfg.jsonOut)
	}
	if counters != nil {
		counters.Start(context.WithoutCancel(ctx))
	}
	g.add(runtimeActor(ctx, client, counters, time.Duration(cfg.ShutdownTimeout)))
	err = g.run()
	logger.Info("idem serve stopped", "err", err)
	return err
}

// errNoSchema is returned when `idem serve --no-migrate` finds a database
// without idem's schema: nothing has migrated it yet (exit code 3).
var errNoSchema = errors.New("the database has no idem schema")

// noSchemaError is err, the failure of a store with no schema version
// applied under --no-migrate, as errNoSchema with the hint to migrate.
func noSchemaError(err error) error {
	return withHint(fmt.Errorf("%w: it was never migrated and --no-migrate does not migrate it (%w)", errNoSchema, err),
		"run `idem migrate` with the same --database (and "+envSchema+") first, or start without --no-migrate")
}

// storeKind names the backend of url for the startup line (never the URL:
// it may hold a password).
func storeKind(url string) string {
	if isPostgres(url) {
		return "postgres"
	}
	return "sqlite:" + sqlitePath(url)
}

// firstAdminKeyID is the id of the admin key a first start creates: one id
// for every node, so that of several nodes starting together on an empty
// database exactly one creates it (the others' create meets the id) and
// prints its secret.
const firstAdminKeyID = "key_first_start"

// hasAPIKey reports whether st holds a key id (revoked or not).
func hasAPIKey(ctx context.Context, st store.Store, id string) bool {
	keys, err := st.APIKeyList(ctx)
	if err != nil {
		return false
	}
	for _, k := range keys {
		if k.ID == id {
			return true
		}
	}
	return false
}

// ensureAdminKey creates and prints an admin key when the database has none.
func ensureAdminKey(ctx context.Context, st store.Store, w io.Writer, asJSON bool) error {
	return mintFirstAdminKey(ctx, st, w, asJSON, nil)
}

// mintFirstAdminKey is ensureAdminKey; afterList, when not nil, runs
// between its look at the keys and its create (a test's second node).
func mintFirstAdminKey(ctx context.Context, st store.Store, w io.Writer, asJSON bool, afterList func()) error {
	keys, err := st.APIKeyList(ctx)
	if err != nil {
		return fmt.Errorf("look for an API key: %w", err) // the store's error says "list api keys"
	}
	if len(keys) > 0 {
		return nil
	}
	if afterList != nil {
		afterList()
	}
	secret, k := idemhttp.NewAPIKey(idem.DefaultTenant, true, "admin (first start)", time.Now())
	k.ID = firstAdminKeyID
	if err := st.APIKeyCreate(ctx, k); err != nil {
		if errors.Is(err, idemtype.ErrInvalid) && hasAPIKey(ctx, st, firstAdminKeyID) {
			// Another node starting at the same time minted it and printed
			// its secret; this one has none to show.
			if !asJSON {
				fmt.Fprintln(w, "idem: another node created the first admin API key and printed it")
			}
			return nil
		}
		return fmt.Errorf("create admin key: %w", err)
	}
	if asJSON {
		return printJSON(w, map[string]string{"admin_api_key": secret, "note": "shown only once"})
	}
	fmt.Fprintf(w, "idem: created an admin API key; it is shown only once:\nIDEM_API_KEY=%s\n", secret)
	return nil
}

// group runs actors in the style of oklog/run: when the first one returns,
// every actor is interrupted, in the order they were added, and run waits
// for all of them. Shutdown order of serve: signals, then the HTTP
// listeners, together (stop accepting, finish in-flight requests:
// httpStop), then the runtime (running jobs finish or are released) —
// requests never meet a stopped runtime.
type group struct{ actors []actor }

type actor struct {
	execute   func() error
	interrupt func(error)
}

func (g *group) add(execute func() error, interrupt func(error)) {
	g.actors = append(g.actors, actor{execute, interrupt})
}

// run returns the error of the first actor to return or, when that one
// returned nil (a signal: a clean stop), the first error of the others as
// they stop (the runtime could not release its jobs' leases, say), so that
// a failed shutdown is not reported as a clean one.
func (g *group) run() error {
	if len(g.actors) == 0 {
		return nil
	}
	errs := make(chan error, len(g.actors))
	for _, a := range g.actors {
		go func() { errs <- a.execute() }()
	}
	err := <-errs
	for _, a := range g.actors {
		a.interrupt(err)
	}
	for range len(g.actors) - 1 {
		if e := <-errs; err == nil {
			err = e
		}
	}
	return err
}

// signalActor returns when ctx ends (main cancels it on SIGTERM/SIGINT).
func signalActor(ctx context.Context) (func() error, func(error)) {
	stop := make(chan struct{})
	return func() error {
			select {
			case <-ctx.Done():
				return nil // a signal is a clean stop
			case <-stop:
				return nil
			}
		}, func(error) {
			select {
			case <-stop:
			default:
				close(stop)
			}
		}
}

// listener is a bound address and the handler it will serve (set once
// the server exists).
type listener struct {
	name string
	ln   net.Listener
	h    http.Handler
}

// listen binds addr now, so a bad or busy address fails at once.
func listen(name, addr string) (*listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, withHint(fmt.Errorf("listen %s: %w", addr, err), "another process uses the port? pick another with --listen / --ops-listen")
	}
	return &listener{name: name, ln: ln}, nil
}

// serve adds the HTTP server of l to the group; its interrupt shuts it
// down with the others of stop.
func (l *listener) serve(g *group, api *idemhttp.Server, stdout io.Writer, logger *slog.Logger, stop *httpStop, asJSON bool) {
	// The API server's connection limits (headers, timeouts, open
	// connections); its shutdown ends long polls at once.
	srv := api.NewHTTPServer(l.h)
	srv.ErrorLog = slog.NewLogLogger(logger.Handler(), slog.LevelWarn)
	l.ln = api.Listener(l.ln)
	if asJSON {
		_ = printJSON(stdout, map[string]string{"listening": l.name, "url": "http://" + l.ln.Addr().String()})
	} else {
		fmt.Fprintf(stdout, "idem: %s listening on http://%s\n", l.name, l.ln.Addr())
	}
	logger.Info("listening", "server", l.name, "addr", l.ln.Addr().String())
	stop.servers = append(stop.servers, namedServer{name: l.name, srv: srv})
	g.add(func() error {
		if err := srv.Serve(l.ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("%s server: %w", l.name, err)
		}
		return nil
	}, func(error) { stop.stop() })
}

// httpStop shuts every HTTP server of serve (the API's, the ops
// listener's) down together under one deadline of grace: the first
// listener's interrupt does it and returns when all are down, the others'
// find it done. One after another, each given grace, they took up to
// grace per listener before the runtime's own stop began.
type httpStop struct {
	grace   time.Duration
	logger  *slog.Logger
	servers []namedServer // complete before the group runs
	once    sync.Once
}

// namedServer is an HTTP server and the name of its listener.
type namedServer struct {
	name string
	srv  *http.Server
}

// stop shuts the servers down at once (stop accepting, finish in-flight
// requests until the deadline, then close what is left).
func (h *httpStop) stop() {
	h.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), h.grace)
		defer cancel()
		var wg sync.WaitGroup
		for _, s := range h.servers {
			wg.Go(func() {
				if err := s.srv.Shutdown(ctx); err != nil {
					h.logger.Warn("http shutdown", "server", s.name, "err", err)
					s.srv.Close()
				}
			})
		}
		wg.Wait()
	})
}

// runtimeActor runs the client's runtime until interrupted, then stops it
// and, once no job can finish any more, flushes the last cache counts
// (counters may be nil).
func runtimeActor(ctx context.Context, client *idem.Client, counters *idemhttp.CacheCounters, grace time.Duration) (func() error, func(error)) {
	stop := make(chan struct{})
	return func() error {
			if err := client.Start(context.WithoutCancel(ctx)); err != nil {
				if counters != nil {
					_ = counters.Stop(context.Background()) // ends its loop; the start error matters
				}
				return err
			}
			<-stop
			sctx, cancel := context.WithTimeout(context.Background(), grace)
			defer cancel()
			err := client.Stop(sctx)
			if counters != nil {
				if cerr := counters.Stop(sctx); cerr != nil && err == nil {
					err = fmt.Errorf("flush cache counters: %w", cerr)
				}
			}
			return err
		}, func(error) {
			select {
			case <-stop:
			default:
				close(stop)
			}
		}
}
