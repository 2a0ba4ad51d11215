package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemclient"
	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/sqlitestore"
	"github.com/idem-dev/idem/webhook"
)

// dedupReceiver is a real webhook endpoint that verifies signatures and
// deduplicates by webhook-id, as receivers are told to: it counts each id
// it accepted and every request it saw.
type dedupReceiver struct {
	mu       sync.Mutex
	secret   []webhook.Secret
	accepted map[string]int // webhook-id → times processed (must stay 1)
	requests int
	badSigs  int
	// holdAfter: from this request on, requests block until release is
	// closed; held is closed when the first one blocks.
	holdAfter int
	held      chan struct{}
	release   chan struct{}
	all       chan struct{} // closed when want distinct ids were accepted
	want      int
}

func (d *dedupReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	d.mu.Lock()
	d.requests++
	if webhook.Verify(d.secret, r.Header, body, time.Now(), 0) != nil {
		d.badSigs++
		d.mu.Unlock()
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	id := r.Header.Get("webhook-id")
	if d.holdAfter > 0 && d.requests >= d.holdAfter {
		if d.requests == d.holdAfter {
			close(d.held)
		}
		d.mu.Unlock()
		<-d.release // the sender dies meanwhile; this answer is lost
		d.mu.Lock()
	}
	if d.accepted[id] == 0 {
		d.accepted[id] = 1 // processed once; a repeat of the id is acknowledged only
		if len(d.accepted) == d.want {
			close(d.all)
		}
	}
	d.mu.Unlock()
	_, _ = io.WriteString(w, `{"ok":true}`)
}

// serveProcess starts `idem serve` delivering queue hooks and returns its
// API URL, and the admin key when it printed one.
func serveProcess(t *testing.T, db string) (cmd *exec.Cmd, apiURL, key string) {
	t.Helper()
	c, out := idemProcess(t, "serve", "--database", db, "--listen", "127.0.0.1:0", "--deliver", "hooks", "--log-level", "warn")
	for apiURL == "" && out.Scan() {
		line := out.Text()
		if strings.HasPrefix(line, "IDEM_API_KEY=") {
			key = strings.TrimPrefix(line, "IDEM_API_KEY=")
		}
		if strings.HasPrefix(line, "idem: api listening on ") {
			apiURL = strings.TrimPrefix(line, "idem: api listening on ")
		}
	}
	if apiURL == "" {
		t.Fatal("serve printed no address")
	}
	go func(s *bufio.Scanner) {
		for s.Scan() {
		}
	}(out)
	return c, apiURL, key
}

// TestDeliveryServerKilled: `idem serve` is SIGKILLed while pushes are in
// flight; restarted on the same database it delivers every event, and the
// receiver, deduplicating by webhook-id, processes each exactly once.
func TestDeliveryServerKilled(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("waits for the lost leases to expire (30s)")
	}
	const n = 40
	rcv := &dedupReceiver{accepted: map[string]int{}, holdAfter: 15, held: make(chan struct{}),
		release: make(chan struct{}), all: make(chan struct{}), want: n}
	hs := httptest.NewServer(rcv)
	defer hs.Close()
	defer func() {
		select {
		case <-rcv.release:
		default:
			close(rcv.release)
		}
	}()
	db := filepath.Join(t.TempDir(), "idem.db")
	proc, apiURL, key := serveProcess(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl, err := idemclient.New(apiURL, &idemclient.Config{APIKey: key})
	if err != nil {
		t.Fatal(err)
	}
	tg, _, err := cl.PutTarget(ctx, "events", &idemclient.TargetPut{URL: hs.URL, Queue: "hooks"})
	if err != nil {
		t.Fatal(err)
	}
	sec, err := webhook.ParseSecret(tg.Secret)
	if err != nil {
		t.Fatal(err)
	}
	rcv.mu.Lock()
	rcv.secret = []webhook.Secret{sec}
	rcv.mu.Unlock()
	var reqs []*idemclient.EnqueueRequest
	for i := range n {
		reqs = append(reqs, &idemclient.EnqueueRequest{Kind: "order.placed", Queue: "hooks", IdempotencyKey: fmt.Sprintf("evt-%03d", i)})
	}
	if _, err := cl.EnqueueBatch(ctx, reqs); err != nil {
		t.Fatal(err)
	}
	<-rcv.held
	if err := proc.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = proc.Wait() // killed
	rcv.mu.Lock()
	rcv.holdAfter = 0
	rcv.mu.Unlock()
	close(rcv.release)

	proc, apiURL, _ = serveProcess(t, db)
	<-rcv.all
	// Every id reached the receiver, but a job whose push was lost may still
	// be on its way to completion (retried, or snoozed while its key was
	// held): the server gets to finish them all before it is stopped.
	cl, err = idemclient.New(apiURL, &idemclient.Config{APIKey: key})
	if err != nil {
		t.Fatal(err)
	}
	waitCompleted(t, ctx, cl, "hooks", n)
	if err := proc.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := proc.Wait(); err != nil {
		t.Fatalf("serve exited with %v after SIGTERM", err)
	}
	checkAllDelivered(t, ctx, db, n)
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	for id, c := range rcv.accepted {
		if c != 1 {
			t.Errorf("webhook-id %s processed %d times", id, c)
		}
	}
	if len(rcv.accepted) != n || rcv.badSigs != 0 {
		t.Fatalf("receiver accepted %d ids (%d bad signatures), want %d", len(rcv.accepted), rcv.badSigs, n)
	}
	t.Logf("%d events, %d requests (%d repeats of an id after the kill, deduplicated)", n, rcv.requests, rcv.requests-n)
}

// waitCompleted polls the server until n jobs of queue are completed, or
// fails the test when ctx ends.
func waitCompleted(t *testing.T, ctx context.Context, cl *idemclient.Client, queue string, n int) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		page, err := cl.ListJobs(ctx, &idemclient.ListParams{
			Filter: idemclient.Filter{Queue: queue, States: []string{"completed"}}, Limit: n + 1})
		if err == nil && len(page.Jobs) >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %d completed jobs in %s: %v (last error %v)", n, queue, ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// checkAllDelivered opens the database after the server stopped: every job
// is completed, and jobs whose push the kill interrupted show a lost
// attempt before the completed one.
func checkAllDelivered(t *testing.T, ctx context.Context, db string, n int) {
	t.Helper()
	st, err := sqlitestore.Open(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	jobs, _, err := st.JobList(ctx, &store.JobListParams{Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	lost := 0
	for _, j := range jobs {
		if j.State != idemtype.StateCompleted {
			t.Errorf("job %d (%s) is %s: %s", j.ID, j.IdempotencyKey, j.State, j.LastError)
		}
		atts, err := st.AttemptList(ctx, &store.AttemptListParams{JobID: j.ID})
		if err != nil {
			t.Fatal(err)
		}
		if len(atts) > 1 {
			lost++
		}
		if last := atts[len(atts)-1]; last.Target != "events" || last.HTTPStatus != 200 {
			t.Errorf("job %d last attempt %+v", j.ID, last)
		}
	}
	if len(jobs) != n || lost == 0 {
		t.Fatalf("%d jobs (%d retried after the kill), want %d with some retried", len(jobs), lost, n)
	}
}
