// Command idem is the idem CLI: serve, migrate, key, bench and the HTTP
// client commands. See `idem --help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/idem-dev/idem/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// The first signal starts the graceful stop (serve: up to
		// shutdown_timeout); the signals are then given back their default
		// action, so that a second one ends the process at once.
		<-ctx.Done()
		stop()
	}()
	code := cli.Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
