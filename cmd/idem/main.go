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
	code := cli.Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
