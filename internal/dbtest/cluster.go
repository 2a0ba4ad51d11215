package dbtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// findPGBin returns the path of a PostgreSQL server binary: from PATH, else
// from the newest /usr/lib/postgresql/*/bin (Debian's layout).
func findPGBin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(matches) == 0 {
		return "", fmt.Errorf("%s not found in PATH or /usr/lib/postgresql/*/bin", name)
	}
	sort.Strings(matches)
	return matches[len(matches)-1], nil
}

// startThrowaway starts a throwaway PostgreSQL cluster in a new temp
// directory (initdb, trust auth, fsync off) on a free port of 127.0.0.1 and
// returns its URL and a function that stops it and removes its files. The
// server dies with this process anyway (PR_SET_PDEATHSIG); run as root, the
// cluster runs as the postgres user, as initdb requires.
func startThrowaway() (string, func(), error) {
	initdb, err := findPGBin("initdb")
	if err != nil {
		return "", nil, err
	}
	postgres, err := findPGBin("postgres")
	if err != nil {
		return "", nil, err
	}
	dir, err := os.MkdirTemp("", "idem-pg-")
	if err != nil {
		return "", nil, err
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		if cred, err = postgresUser(dir); err != nil {
			return "", nil, err
		}
	}
	data := filepath.Join(dir, "data")
	cmd := exec.Command(initdb, "-D", data, "-A", "trust", "-U", "postgres", "--no-sync")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	port, err := freePort()
	if err != nil {
		return "", nil, err
	}
	server, exited, err := startServer(postgres, data, dir, port, cred)
	if err != nil {
		return "", nil, err
	}
	stop := func() {
		_ = server.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
		}
		_ = os.RemoveAll(dir)
	}
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	if err := waitReady(url, 30*time.Second); err != nil {
		stop()
		return "", nil, err
	}
	return url, stop, nil
}

// postgresUser makes dir the postgres user's and returns its credential.
func postgresUser(dir string) (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root needs a postgres user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// startServer starts postgres from a goroutine that keeps its OS thread for
// the life of the process: PR_SET_PDEATHSIG fires when the creating thread
// exits, so that thread must never exit before the process does.
func startServer(bin, data, sockDir string, port int, cred *syscall.Credential) (*exec.Cmd, <-chan struct{}, error) {
	cmd := exec.Command(bin, "-D", data, "-p", strconv.Itoa(port), "-k", sockDir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=200")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGTERM}
	started := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread lives as long as the process
		err := cmd.Start()
		started <- err
		if err == nil {
			_ = cmd.Wait()
		}
		close(exited)
		select {} // keep the thread alive: its exit would signal the server
	}()
	if err := <-started; err != nil {
		return nil, nil, fmt.Errorf("start postgres: %w", err)
	}
	return cmd, exited, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitReady waits until the server at url accepts connections.
func waitReady(url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, url)
		if err == nil {
			conn.Close(ctx)
			cancel()
			return nil
		}
		cancel()
		if time.Now().After(deadline) {
			return errors.Join(errors.New("throwaway postgres did not start"), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
