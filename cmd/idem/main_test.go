package main

import (
	"bufio"
	"context"
	"debug/elf"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStaticBinary builds idem the way deploy/Dockerfile does
// (CGO_ENABLED=0, -trimpath), checks the binary is static, and starts it:
// version, then serve until /readyz answers, then SIGTERM exits 0.
func TestStaticBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "idem")
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	if runtime.GOOS == "linux" {
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Fatal("binary has a dynamic loader: not static")
			}
		}
		f.Close()
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "idem ") {
		t.Fatalf("version: %v %q", err, out)
	}

	cmd, addr, _ := startServe(t, bin)
	url := "http://" + addr
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/readyz", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 200 || res.Header.Get("X-Request-Id") == "" {
		t.Fatalf("readyz: %v %v", res, err)
	}
	res.Body.Close()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
}

// buildIdem builds this command into a temporary directory and returns
// the binary's path.
func buildIdem(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "idem")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// startServe starts `bin serve` on a new SQLite file in a temporary
// directory, with args added, and returns it once it printed its API
// address (host:port) and, when it made one, the admin key; the process is
// killed at the test's end.
func startServe(t *testing.T, bin string, args ...string) (cmd *exec.Cmd, addr, key string) {
	t.Helper()
	dir := t.TempDir()
	cmd = exec.Command(bin, append([]string{"serve", "--listen", "127.0.0.1:0", "--database", filepath.Join(dir, "idem.db")}, args...)...)
	cmd.Dir = dir
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(stdout)
	for addr == "" && sc.Scan() {
		if k, ok := strings.CutPrefix(sc.Text(), "IDEM_API_KEY="); ok {
			key = k
		}
		if u, ok := strings.CutPrefix(sc.Text(), "idem: api listening on "); ok {
			addr = strings.TrimPrefix(u, "http://")
		}
	}
	if addr == "" {
		t.Fatal("serve printed no address")
	}
	go func() {
		for sc.Scan() {
		}
	}()
	return cmd, addr, key
}
