package cli

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/idem-dev/idem/idemclient"
)

// TestMain doubles as the idem binary: with IDEM_CLI_MAIN=1 the test
// binary runs the CLI with its arguments, as cmd/idem does.
func TestMain(m *testing.M) {
	if os.Getenv("IDEM_CLI_MAIN") == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	goleak.VerifyTestMain(m)
}

// idemProcess starts the CLI as a real process.
func idemProcess(t *testing.T, args ...string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	return idemProcessEnv(t, nil, args...)
}

// idemProcessEnv is idemProcess with extra environment variables.
func idemProcessEnv(t *testing.T, env []string, args ...string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), "IDEM_CLI_MAIN=1"), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	return cmd, bufio.NewScanner(out)
}

// serveWithOps starts `idem serve` on the SQLite file db with an API and an
// ops listener (args added) and reads its output until it printed its admin
// key and both addresses.
func serveWithOps(t *testing.T, db string, args ...string) (cmd *exec.Cmd, out *bufio.Scanner, key, apiURL, opsURL string) {
	t.Helper()
	cmd, out = idemProcess(t, append([]string{"serve", "--database", db, "--listen", "127.0.0.1:0", "--ops-listen", "127.0.0.1:0"}, args...)...)
	for (key == "" || apiURL == "" || opsURL == "") && out.Scan() {
		line := out.Text()
		switch {
		case strings.HasPrefix(line, "IDEM_API_KEY="):
			key = strings.TrimPrefix(line, "IDEM_API_KEY=")
		case strings.HasPrefix(line, "idem: api listening on "):
			apiURL = strings.TrimPrefix(line, "idem: api listening on ")
		case strings.HasPrefix(line, "idem: ops listening on "):
			opsURL = strings.TrimPrefix(line, "idem: ops listening on ")
		}
	}
	if key == "" || apiURL == "" || opsURL == "" {
		t.Fatalf("serve printed key %q api %q ops %q", key, apiURL, opsURL)
	}
	return cmd, out, key, apiURL, opsURL
}

// TestServeProcess: `idem serve` as a real process prints its admin key,
// serves the API and exits 0 on SIGTERM; a second start prints no key.
func TestServeProcess(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "idem.db")
	cmd, _, key, apiURL, opsURL := serveWithOps(t, db, "--log-format", "json")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := idemclient.New(apiURL, &idemclient.Config{APIKey: key})
	if err != nil {
		t.Fatal(err)
	}
	res, err := cl.Enqueue(ctx, &idemclient.EnqueueRequest{Kind: "hello", IdempotencyKey: "first"})
	if err != nil || res.Existing || res.Job.State != "available" {
		t.Fatalf("enqueue: %+v %v", res, err)
	}
	ops, _ := idemclient.New(opsURL, nil)
	if err := ops.Health(ctx); err != nil {
		t.Fatalf("ops healthz: %v", err)
	}
	if err := cl.Health(ctx); err == nil {
		t.Fatal("healthz still on the API address with --ops-listen")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve exited with %v, want 0", err)
	}

	// Restart on the same database: no new key, the job is still there.
	cmd, out := idemProcess(t, "serve", "--database", db, "--listen", "127.0.0.1:0")
	apiURL = ""
	for apiURL == "" && out.Scan() {
		line := out.Text()
		if strings.HasPrefix(line, "IDEM_API_KEY=") {
			t.Fatal("second start printed a new key")
		}
		apiURL = strings.TrimPrefix(line, "idem: api listening on ")
		if apiURL == line {
			apiURL = ""
		}
	}
	cl, _ = idemclient.New(apiURL, &idemclient.Config{APIKey: key})
	if j, err := cl.GetJob(ctx, res.Job.ID); err != nil || j.Kind != "hello" {
		t.Fatalf("after restart: %v %v", j, err)
	}
	cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve exited with %v after SIGINT, want 0", err)
	}
}
