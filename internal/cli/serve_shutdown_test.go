package cli

import (
	"bufio"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeStopsListenersTogether: on SIGTERM `idem serve` shuts its API
// and ops listeners down together, under one shutdown_timeout. It shut
// them one after another, each given the whole timeout: while a request in
// flight held the API's stop (here up to the 30 s read timeout, the
// timeout being 60 s), the ops listener still accepted connections, and
// the worst stop took a timeout per listener plus the runtime's.
func TestServeStopsListenersTogether(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "idem.db")
	cmd, _, key, apiURL, opsURL := serveWithOps(t, db, "--shutdown-timeout", "60s")
	apiAddr, opsAddr := strings.TrimPrefix(apiURL, "http://"), strings.TrimPrefix(opsURL, "http://")
	// A request whose body never comes holds the API's graceful stop; its
	// handler is reading the body once the server sent 100 Continue.
	conn, err := net.Dial("tcp", apiAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/jobs HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
		"Content-Length: 1000\r\nExpect: 100-continue\r\n\r\n", apiAddr, key)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if line, err := bufio.NewReader(conn).ReadString('\n'); err != nil || !strings.Contains(line, " 100 ") {
		t.Fatalf("want 100 Continue, got %q %v", line, err)
	}
	fmt.Fprint(conn, "{")
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The API's stop waits for the request (up to the 30 s read
	// timeout); the ops listener's goes on beside it and closes it.
	for _, l := range []struct{ name, addr string }{{"api", apiAddr}, {"ops", opsAddr}} {
		deadline := time.Now().Add(20 * time.Second)
		for {
			c, err := net.DialTimeout("tcp", l.addr, time.Second)
			if err != nil {
				break
			}
			c.Close()
			if time.Now().After(deadline) {
				t.Fatalf("the %s listener still accepts connections 20 s into the stop, while a request holds the API's", l.name)
			}
			select {
			case err := <-exited:
				t.Fatalf("serve stopped (%v) while a request in flight should hold its stop", err)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	select {
	case err := <-exited:
		t.Fatalf("serve stopped (%v) while a request in flight should hold its stop", err)
	default:
	}
	conn.Close() // the request ends: the stop completes
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("serve exited with %v, want 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve still running 30 s after the request ended")
	}
}
