package idem_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

// TestNATSConnectDoesNotStallWebhooks: a NATS server that accepts the
// connection and never answers (a hung broker; a host that drops SYNs is
// the same for up to the 5 s connect timeout) holds the NATS target's own
// delivery only. A webhook job of another target is pushed meanwhile. The
// NATS connection used to be dialled under the lock of every target
// lookup, so each delivery of the process waited for the hung connect.
func TestNATSConnectDoesNotStallWebhooks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hung, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hung.Close() })
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			conn, err := hung.Accept()
			if err != nil {
				return
			}
			accepted <- conn // never answered: no INFO, the connect waits
		}
	}()
	t.Cleanup(func() {
		for {
			select {
			case conn := <-accepted:
				conn.Close()
			default:
				return
			}
		}
	})
	rcv := newReceiver(t, nil, func(_ int, w http.ResponseWriter) { _, _ = io.WriteString(w, `{"ok":true}`) })
	b := setup(t, deliveryConfig())
	if _, err := b.client.TargetPut(ctx, &idem.Target{Name: "stream", Kind: "to.nats", URL: "nats://" + hung.Addr().String() + "/subj"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.TargetPut(ctx, &idem.Target{Name: "hook", Kind: "to.hook", URL: rcv.srv.URL}); err != nil {
		t.Fatal(err)
	}
	b.start(t)
	enqueueHook(t, b.client, "to.nats", "n1")
	var natsConn net.Conn
	select {
	case natsConn = <-accepted: // the NATS delivery is connecting now
	case <-time.After(waitTimeout):
		t.Fatal("the NATS target never connected")
	}
	defer natsConn.Close()
	job := enqueueHook(t, b.client, "to.hook", "h1")
	waitState(t, b, job.ID, idem.StateCompleted)
	// The webhook was pushed while the connect still waited for the
	// server's INFO: the client has not given up on (closed) it. Reading
	// finds no data and no end of stream.
	if err := natsConn.SetReadDeadline(time.Now().Add(200 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := natsConn.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the webhook was pushed only after the hung NATS connect ended (read: %v)", err)
	}
}
