package main

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSecondSignalStopsAtOnce: SIGTERM starts serve's graceful stop, which
// waits up to shutdown_timeout for requests in flight; a second SIGTERM
// ends the process at once. It was swallowed: the operator had to wait out
// the timeout (here 60 s) or use SIGKILL.
func TestSecondSignalStopsAtOnce(t *testing.T) {
	cmd, addr, key := startServe(t, buildIdem(t), "--shutdown-timeout", "60s")
	// A request whose body never comes keeps the graceful stop waiting
	// (until the read timeout, 30 s, or shutdown_timeout). Its handler is
	// reading the body once the server sent 100 Continue.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/jobs HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
		"Content-Length: 1000\r\nExpect: 100-continue\r\n\r\n", addr, key)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.Contains(line, " 100 ") {
		t.Fatalf("want 100 Continue, got %q %v", line, err)
	}
	fmt.Fprint(conn, "{")
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		t.Fatalf("serve stopped %v after the first SIGTERM: the request in flight should hold its graceful stop", err)
	case <-time.After(2 * time.Second): // the graceful stop waits for the request

	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("serve still running 10 s after a second SIGTERM")
	}
}
