package idem_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idem-dev/idem"
)

// natsAuthServer starts a real nats-server (JetStream on, on a free port
// of 127.0.0.1) that requires args' credentials (--user/--pass or --auth)
// and returns its host:port; it is stopped when the test ends. Without the
// nats-server binary it fails under IDEM_REQUIRE_NATS=1 and skips loudly
// otherwise.
func natsAuthServer(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		if os.Getenv("IDEM_REQUIRE_NATS") == "1" {
			t.Fatalf("nats-server is required (IDEM_REQUIRE_NATS=1): %v", err)
		}
		t.Skipf("*** SKIP: no nats-server binary (%v); IDEM_REQUIRE_NATS=1 makes this a failure ***", err)
	}
	cmd := exec.Command(bin, append([]string{"-a", "127.0.0.1", "-p", "-1", "-js", "-sd", t.TempDir()}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	listening := regexp.MustCompile(`Listening for client connections on (127\.0\.0\.1:\d+)`)
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		found := false
		for sc.Scan() { // read to the end: the server blocks on a full pipe
			if m := listening.FindStringSubmatch(sc.Text()); m != nil && !found {
				found = true
				addr <- m[1]
			}
		}
		close(addr)
	}()
	select {
	case a, ok := <-addr:
		if !ok {
			t.Fatal("nats-server ended without listening")
		}
		return a
	case <-time.After(30 * time.Second):
		t.Fatal("nats-server did not start listening")
	}
	return ""
}

// TestTopicNATSSubscriptionWithCredentials: a subscription to a NATS
// server that requires a user and password, or a token, delivers when its
// URL carries them (nats://user:pass@host:port/subject,
// nats://token@host:port/subject); they were dropped, so such a server
// could not be used.
func TestTopicNATSSubscriptionWithCredentials(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		args     []string
		userinfo string
		opt      nats.Option
	}{
		"user and password": {[]string{"--user", "idem", "--pass", "s3cret"}, "idem:s3cret@", nats.UserInfo("idem", "s3cret")},
		"token":             {[]string{"--auth", "t0ken"}, "t0ken@", nats.Token("t0ken")},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			addr := natsAuthServer(t, tc.args...)
			nc, err := nats.Connect("nats://"+addr, tc.opt, nats.Timeout(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(nc.Close)
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.events"},
				Storage: jetstream.MemoryStorage})
			if err != nil {
				t.Fatal(err)
			}
			cfg := topicConfig()
			cfg.MaxAttempts = 3 // a refused connection is dead soon, not retried for long
			b := setup(t, cfg)
			if _, err := b.client.SubscriptionPut(ctx, &idem.Subscription{Topic: "orders", Name: "stream",
				URL: "nats://" + tc.userinfo + addr + "/orders.events"}); err != nil {
				t.Fatal(err)
			}
			b.start(t)
			if _, err := b.client.Publish(ctx, &idem.Event{Topic: "orders", Key: "k1", Payload: json.RawMessage(`{"n":1}`)}); err != nil {
				t.Fatal(err)
			}
			jobs, _, err := b.client.JobList(ctx, &idem.JobListParams{Limit: 1})
			if err != nil || len(jobs) != 1 {
				t.Fatalf("jobs %v %v", jobs, err)
			}
			waitState(t, b, jobs[0].ID, idem.StateCompleted)
			info, err := stream.Info(ctx)
			if err != nil || info.State.Msgs != 1 {
				t.Fatalf("stream holds %v messages (%v), want 1", info.State.Msgs, err)
			}
		})
	}
}
