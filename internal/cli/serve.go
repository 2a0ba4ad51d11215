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
	"time"

	"github.com/spf13/cobra"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp"
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

// serveFlags are the inputs of `idem serve`.
type serveFlags struct {
	db, listen, opsListen, logLevel, logFormat string
	shutdownTimeout                            time.Duration
}

func newServeCmd() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the HTTP API server",
		Long: `Serves the HTTP API v1 (/v1/...), /healthz, /readyz and /metrics, and runs the
maintenance services (lease rescuer, promoter, retention) on the elected leader.

With no flags: SQLite at ./idem.db, listening on 127.0.0.1:8080. On the first
start (no API key in the database) an admin API key is created and printed once.

Environment: IDEM_DATABASE_URL (a SQLite path or postgres://…), IDEM_LISTEN,
IDEM_OPS_LISTEN, IDEM_LOG_LEVEL (debug|info|warn|error), IDEM_LOG_FORMAT
(text|json). Flags win over the environment.

SIGTERM or SIGINT: stop accepting connections, finish in-flight requests (up
to --shutdown-timeout), then stop the runtime gracefully.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServe(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), &f)
		},
	}
	fl := cmd.Flags()
	databaseFlag(cmd, &f.db)
	fl.StringVar(&f.listen, "listen", "", "API listen address (env "+envListen+", default "+defaultListen+")")
	fl.StringVar(&f.opsListen, "ops-listen", "", "serve /healthz, /readyz and /metrics on this address instead (env "+envOpsListen+")")
	fl.StringVar(&f.logLevel, "log-level", "", "debug, info, warn or error (env "+envLogLevel+", default info)")
	fl.StringVar(&f.logFormat, "log-format", "", "text or json (env "+envLogFormat+", default text)")
	fl.DurationVar(&f.shutdownTimeout, "shutdown-timeout", defaultShutdownTTL, "how long in-flight requests and jobs get at shutdown")
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

func runServe(ctx context.Context, stdout, stderr io.Writer, f *serveFlags) error {
	logger, err := newLogger(stderr, orEnv(f.logLevel, envLogLevel, "info"), orEnv(f.logFormat, envLogFormat, "text"))
	if err != nil {
		return err
	}
	st, err := openStore(ctx, resolveDatabase(f.db))
	if err != nil {
		return err
	}
	defer st.Close()
	if err := ensureAdminKey(ctx, st, stdout); err != nil {
		return err
	}
	client, err := idem.NewClient(st, &idem.Config{Logger: logger})
	if err != nil {
		return err
	}
	server, err := idemhttp.NewServer(client, st, &idemhttp.Config{Logger: logger})
	if err != nil {
		return err
	}
	var g group
	g.add(signalActor(ctx))
	opsAddr := orEnv(f.opsListen, envOpsListen, "")
	apiHandler := http.Handler(server)
	if opsAddr != "" {
		apiHandler = server.APIHandler()
	}
	if err := addHTTP(&g, stdout, logger, server, "api", orEnv(f.listen, envListen, defaultListen), ui.Mount(apiHandler, &ui.Config{Logger: logger}), f.shutdownTimeout); err != nil {
		return err
	}
	if opsAddr != "" {
		if err := addHTTP(&g, stdout, logger, server, "ops", opsAddr, server.OpsHandler(), f.shutdownTimeout); err != nil {
			return err
		}
	}
	g.add(runtimeActor(ctx, client, f.shutdownTimeout))
	err = g.run()
	logger.Info("idem serve stopped", "err", err)
	return err
}

// ensureAdminKey creates and prints an admin key when the database has none.
func ensureAdminKey(ctx context.Context, st store.Store, w io.Writer) error {
	keys, err := st.APIKeyList(ctx)
	if err != nil {
		return fmt.Errorf("list api keys: %w", err)
	}
	if len(keys) > 0 {
		return nil
	}
	secret, k := idemhttp.NewAPIKey(idem.DefaultTenant, true, "admin (first start)", time.Now())
	if err := st.APIKeyCreate(ctx, k); err != nil {
		return fmt.Errorf("create admin key: %w", err)
	}
	fmt.Fprintf(w, "idem: created an admin API key; it is shown only once:\nIDEM_API_KEY=%s\n", secret)
	return nil
}

// group runs actors in the style of oklog/run: when the first one returns,
// every actor is interrupted, in the order they were added, and run waits
// for all of them. Shutdown order of serve: signals, then the HTTP
// listeners (stop accepting, finish in-flight requests), then the runtime
// (running jobs finish or are released) — requests never meet a stopped
// runtime.
type group struct{ actors []actor }

type actor struct {
	execute   func() error
	interrupt func(error)
}

func (g *group) add(execute func() error, interrupt func(error)) {
	g.actors = append(g.actors, actor{execute, interrupt})
}

// run returns the error of the first actor to return.
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
		<-errs
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

// addHTTP listens on addr now (so a bad address fails at once) and adds
// the server to the group, with the API server's connection limits
// (headers, timeouts, open connections); its shutdown ends long polls.
func addHTTP(g *group, stdout io.Writer, logger *slog.Logger, api *idemhttp.Server, name, addr string, h http.Handler, grace time.Duration) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	srv := api.NewHTTPServer(h)
	ln = api.Listener(ln)
	fmt.Fprintf(stdout, "idem: %s listening on http://%s\n", name, ln.Addr())
	g.add(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("%s server: %w", name, err)
		}
		return nil
	}, func(error) {
		ctx, cancel := context.WithTimeout(context.Background(), grace)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			logger.Warn("http shutdown", "server", name, "err", err)
			srv.Close()
		}
	})
	return nil
}

// runtimeActor runs the client's runtime until interrupted, then stops it.
func runtimeActor(ctx context.Context, client *idem.Client, grace time.Duration) (func() error, func(error)) {
	stop := make(chan struct{})
	return func() error {
			if err := client.Start(context.WithoutCancel(ctx)); err != nil {
				return err
			}
			<-stop
			sctx, cancel := context.WithTimeout(context.Background(), grace)
			defer cancel()
			return client.Stop(sctx)
		}, func(error) {
			select {
			case <-stop:
			default:
				close(stop)
			}
		}
}
