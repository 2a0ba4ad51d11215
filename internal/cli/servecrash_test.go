package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemclient"
	"github.com/idem-dev/idem/internal/dbtest"
)

// serveOn starts `idem serve` on db (env: extra environment, such as the
// PostgreSQL schema) and returns its API URL and, on the first start, the
// admin key it prints.
func serveOn(t *testing.T, db string, env ...string) (url, key string, kill func()) {
	t.Helper()
	cmd, out := idemProcessEnv(t, env, "serve", "--database", db, "--listen", "127.0.0.1:0")
	for url == "" && out.Scan() {
		line := out.Text()
		if k, ok := strings.CutPrefix(line, "IDEM_API_KEY="); ok {
			key = k
		}
		if u, ok := strings.CutPrefix(line, "idem: api listening on "); ok {
			url = u
		}
	}
	if url == "" {
		t.Fatal("serve printed no API address")
	}
	return url, key, func() {
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
	}
}

// crashLedger is what the server acknowledged (2xx) before it was killed.
type crashLedger struct {
	mu        sync.Mutex
	enqueued  map[string]string // job id → idempotency key
	claimed   map[string]int    // job id → claims answered
	completed map[string]bool
	killed    bool
}

// TestServeSIGKILLKeepsAcknowledgedWork: `idem serve` (a real process) is
// SIGKILLed while two enqueuers, two claimers and their completions run
// against it. Overlap: the kill waits until 150 completions were
// acknowledged while the enqueuers are still running, so requests of every
// kind are in flight at the kill. After a restart on the same database
// every acknowledged enqueue exists with its key, every acknowledged
// completion is stored with its result, no job was handed out twice before
// the kill, and no claim after it returns a job that was completed or is
// still leased.
func TestServeSIGKILLKeepsAcknowledgedWork(t *testing.T) {
	t.Parallel()
	checkServeSIGKILL(t, filepath.Join(t.TempDir(), "idem.db"))
}

// TestServeSIGKILLKeepsAcknowledgedWorkPostgres is the same on PostgreSQL
// (the server in a schema of its own, passed in IDEM_PG_SCHEMA): the
// killed server's sessions die with it, and a claim or completion
// acknowledged before the kill must have committed.
func TestServeSIGKILLKeepsAcknowledgedWorkPostgres(t *testing.T) {
	t.Parallel()
	url, schema := dbtest.NewSchema(t)
	checkServeSIGKILL(t, url, envSchema+"="+schema)
}

func checkServeSIGKILL(t *testing.T, db string, env ...string) {
	url, key, kill := serveOn(t, db, env...)
	cl, err := idemclient.New(url, &idemclient.Config{APIKey: key, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l := &crashLedger{enqueued: map[string]string{}, claimed: map[string]int{}, completed: map[string]bool{}}
	killNow := make(chan struct{})
	var once sync.Once
	failed := func(err error) bool { // true: stop this goroutine
		l.mu.Lock()
		defer l.mu.Unlock()
		if !l.killed {
			t.Errorf("request failed before the kill: %v", err)
		}
		return true
	}
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				k := fmt.Sprintf("crash-%d-%d", g, i)
				res, err := cl.Enqueue(ctx, &idemclient.EnqueueRequest{Kind: "crash", Queue: "crash", IdempotencyKey: k})
				if err != nil && failed(err) {
					return
				}
				l.mu.Lock()
				l.enqueued[res.Job.ID] = k
				l.mu.Unlock()
			}
		})
		wg.Go(func() {
			for ctx.Err() == nil {
				jobs, err := cl.Claim(ctx, &idemclient.ClaimRequest{Queues: []string{"crash"}, WorkerID: "w" + strconv.Itoa(g),
					Limit: 10, Lease: time.Minute, Wait: time.Second})
				if err != nil && failed(err) {
					return
				}
				for _, j := range jobs {
					l.mu.Lock()
					l.claimed[j.ID]++
					l.mu.Unlock()
					if _, err := cl.Complete(ctx, j.ID, j.LeaseToken, []byte(strconv.Quote(j.ID))); err != nil && failed(err) {
						return
					}
					l.mu.Lock()
					l.completed[j.ID] = true
					if len(l.completed) >= 150 {
						once.Do(func() { close(killNow) })
					}
					l.mu.Unlock()
				}
			}
		})
	}
	select {
	case <-killNow:
	case <-ctx.Done():
		t.Fatal("150 completions were never acknowledged")
	}
	l.mu.Lock()
	l.killed = true
	l.mu.Unlock()
	kill()
	wg.Wait()

	url, _, _ = serveOn(t, db, env...)
	cl, err = idemclient.New(url, &idemclient.Config{APIKey: key})
	if err != nil {
		t.Fatal(err)
	}
	for id, k := range l.enqueued {
		j, err := cl.GetJob(ctx, id)
		if err != nil || j.IdempotencyKey != k {
			t.Fatalf("acknowledged job %s (key %s) after the restart: %+v %v", id, k, j, err)
		}
		if l.completed[id] && (j.State != "completed" || string(j.Result) != strconv.Quote(id)) {
			t.Fatalf("acknowledged completion of job %s: state %s result %s", id, j.State, j.Result)
		}
	}
	for id, n := range l.claimed {
		if n != 1 {
			t.Fatalf("job %s was claimed %d times before the kill", id, n)
		}
	}
	// What was never claimed is claimable now; nothing claimed before the
	// kill is (completed, or leased for a minute).
	var after int
	for {
		jobs, err := cl.Claim(ctx, &idemclient.ClaimRequest{Queues: []string{"crash"}, WorkerID: "after", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) == 0 {
			break
		}
		for _, j := range jobs {
			if l.claimed[j.ID] > 0 {
				t.Fatalf("job %s was claimed before the kill and again after it", j.ID)
			}
			after++
		}
	}
	t.Logf("%d enqueues and %d completions acknowledged before the kill; %d jobs claimed after the restart",
		len(l.enqueued), len(l.completed), after)
}
