package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/pgstore"
)

// chaosArgs are the args of the connection-chaos jobs.
type chaosArgs struct {
	Seq       int `json:"seq"`
	FailUntil int `json:"fail_until,omitempty"` // fail while attempt < FailUntil
}

// chaosRun is one handler execution of a connection-chaos job.
type chaosRun struct {
	job, attempt int64
	ok           bool // the handler returned a result (its completion may or may not have committed)
}

// chaosLog records handler executions in start order.
type chaosLog struct {
	mu   sync.Mutex
	runs []chaosRun
	done atomic.Int64 // handler executions that returned a result
}

func (l *chaosLog) handler(ctx context.Context, j *idem.JobRow) (json.RawMessage, error) {
	var a chaosArgs
	if err := json.Unmarshal(j.Args, &a); err != nil {
		return nil, idem.JobPermanent(err)
	}
	l.mu.Lock()
	i := len(l.runs)
	l.runs = append(l.runs, chaosRun{job: j.ID, attempt: int64(j.Attempt)})
	l.mu.Unlock()
	ok := j.Attempt >= a.FailUntil
	l.mu.Lock()
	l.runs[i].ok = ok
	l.mu.Unlock()
	if !ok {
		return nil, errors.New("planned failure")
	}
	l.done.Add(1)
	return json.RawMessage(strconv.Itoa(a.Seq)), nil
}

// chaosEnqueued is what the enqueuers learned about one item.
type chaosEnqueued struct {
	mu     sync.Mutex
	ids    map[int]int64 // seq → job id the API returned
	lost   map[int]bool  // unkeyed seqs whose enqueue failed (0 or 1 job may exist)
	errs   int           // connection errors that surfaced to the enqueuers
	keyed  map[int]bool  // seqs enqueued with an idempotency key
	retrys int           // keyed enqueues retried after an error
}

func (e *chaosEnqueued) ok(seq int, id int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ids[seq] = id
}

// TestPostgresConnectionChaos: two clients on one schema enqueue (batches
// and single calls; keyed, unkeyed, partitioned, some failing once) and
// work ~2,600 jobs while a chaos loop terminates every PostgreSQL backend
// of theirs (found by the test's own application_name) every few tens of
// milliseconds. Enqueue calls return errors (no panic, no hang past their
// deadline); keyed enqueues retried after an error never make a second
// job. Once chaos stops, every job completes exactly once: no attempt runs
// twice, no handler runs after its job's completion committed, each earlier
// successful run is recorded as a lost (rescued) attempt, and nothing stays
// running. A claim or finish whose commit went through while its
// connection died is settled by the completer's retry (ErrLeaseLost: the
// job is already finished) or, for a claim whose answer was lost, by the
// rescuer once the lease expires (docs/postgres.md, "Lost connections").
func TestPostgresConnectionChaos(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base, schema := dbtest.NewSchema(t)
	admin, err := pgxpool.New(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	app := "idem-chaos-" + schema
	appURL := withAppName(t, base, app)
	log := &chaosLog{}
	var classify *pgstore.Store
	clients := make([]*idem.Client, 2)
	for i := range clients {
		pool, err := pgxpool.New(ctx, appURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		st, err := pgstore.New(ctx, pool, &pgstore.Config{Schema: schema, SkipMigrate: i > 0,
			Logger: quietLogger(), ListenReconnectDelay: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		classify = st
		workers := idem.NewWorkers()
		workers.Handle("chaos", log.handler)
		c, err := idem.NewClient(st, &idem.Config{Workers: workers, WorkerID: "node-" + strconv.Itoa(i),
			Logger: quietLogger(), Queues: map[string]idem.QueueConfig{"chaos": {MaxWorkers: 20}},
			LeaseDuration: 1500 * time.Millisecond, RescueInterval: 100 * time.Millisecond, LeaderTTL: time.Second,
			Retry: idem.RetryPolicy{Base: 10 * time.Millisecond, Max: 50 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		(&bundle{client: c}).start(t)
		clients[i] = c
	}

	began := time.Now()
	const nBatch, nSingle = 1600, 400
	enq := &chaosEnqueued{ids: map[int]int64{}, lost: map[int]bool{}, keyed: map[int]bool{}}
	item := func(seq int) idem.EnqueueParams {
		a := chaosArgs{Seq: seq}
		if seq%25 == 0 {
			a.FailUntil = 2
		}
		opts := &idem.EnqueueOpts{Queue: "chaos", MaxAttempts: 50}
		switch seq % 5 {
		case 0:
			opts.IdempotencyKey = fmt.Sprintf("chaos-%d", seq)
		case 1:
			opts.IdempotencyKey = fmt.Sprintf("chaos-%d", seq)
			opts.PartitionKey = fmt.Sprintf("p-%d", seq%7)
		case 2:
			opts.PartitionKey = fmt.Sprintf("p-%d", seq%11)
		}
		if opts.IdempotencyKey != "" {
			enq.mu.Lock()
			enq.keyed[seq] = true
			enq.mu.Unlock()
		}
		args, _ := json.Marshal(a)
		return idem.EnqueueParams{Kind: "chaos", Args: args, Opts: opts}
	}
	// failed classifies an enqueue error: a connection error is counted; a
	// call that ran into its own deadline hung, anything else is unexpected.
	failed := func(what string, err error) {
		t.Helper()
		enq.mu.Lock()
		enq.errs++
		enq.mu.Unlock()
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			t.Errorf("%s hung until its deadline: %v", what, err)
		case !classify.IsUnavailable(err):
			t.Errorf("%s: not a connection error: %v", what, err)
		}
	}
	// call runs one API call bounded by a deadline.
	call := func(fn func(ctx context.Context) error) error {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return fn(cctx)
	}
	// retryKeyed enqueues keyed items on c until each is answered, then
	// records the answers.
	retryKeyed := func(c *idem.Client, items []idem.EnqueueParams, seqs []int) {
		for try := 0; len(items) > 0; try++ {
			if try > 200 {
				t.Errorf("keyed enqueue of %d items failed 200 times", len(items))
				return
			}
			if try > 0 {
				enq.mu.Lock()
				enq.retrys += len(items)
				enq.mu.Unlock()
			}
			var res []idem.EnqueueResult
			err := call(func(ctx context.Context) (err error) { res, err = c.EnqueueMany(ctx, items); return err })
			if err != nil {
				failed("keyed EnqueueMany", err)
				continue
			}
			var again []idem.EnqueueParams
			var againSeqs []int
			for k, r := range res {
				if r.Err != nil {
					failed("keyed EnqueueMany item", r.Err)
					again, againSeqs = append(again, items[k]), append(againSeqs, seqs[k])
					continue
				}
				enq.ok(seqs[k], r.Job.ID)
			}
			items, seqs = again, againSeqs
		}
	}
	var enqueuers sync.WaitGroup
	enqueuers.Add(2)
	go func() { // batches of 50 on client 0
		defer enqueuers.Done()
		for start := 0; start < nBatch; start += 50 {
			var items []idem.EnqueueParams
			var seqs []int
			for seq := start; seq < start+50; seq++ {
				items, seqs = append(items, item(seq)), append(seqs, seq)
			}
			var res []idem.EnqueueResult
			err := call(func(ctx context.Context) (err error) { res, err = clients[0].EnqueueMany(ctx, items); return err })
			var keyed []idem.EnqueueParams
			var keyedSeqs []int
			for k, p := range items {
				var itemErr error
				switch {
				case err != nil:
					itemErr = err
				case res[k].Err != nil:
					itemErr = res[k].Err
					failed("EnqueueMany item", itemErr)
				default:
					enq.ok(seqs[k], res[k].Job.ID)
					continue
				}
				if p.Opts.IdempotencyKey != "" {
					keyed, keyedSeqs = append(keyed, p), append(keyedSeqs, seqs[k])
				} else {
					enq.mu.Lock()
					enq.lost[seqs[k]] = true
					enq.mu.Unlock()
				}
			}
			if err != nil {
				failed("EnqueueMany", err)
			}
			retryKeyed(clients[0], keyed, keyedSeqs)
		}
	}()
	go func() { // single enqueues on client 1
		defer enqueuers.Done()
		for seq := nBatch; seq < nBatch+nSingle; seq++ {
			p := item(seq)
			for try := 0; ; try++ {
				var res *idem.EnqueueResult
				err := call(func(ctx context.Context) (err error) { res, err = clients[1].EnqueueRaw(ctx, p); return err })
				if err == nil {
					enq.ok(seq, res.Job.ID)
					break
				}
				failed("EnqueueRaw", err)
				if p.Opts.IdempotencyKey == "" {
					enq.mu.Lock()
					enq.lost[seq] = true
					enq.mu.Unlock()
					break
				}
				if try >= 200 {
					t.Errorf("keyed EnqueueRaw of seq %d failed 200 times", seq)
					break
				}
				enq.mu.Lock()
				enq.retrys++
				enq.mu.Unlock()
			}
		}
	}()
	enqueued := make(chan struct{})
	go func() {
		enqueuers.Wait()
		t.Logf("enqueued at %s", time.Since(began).Round(time.Millisecond))
		close(enqueued)
	}()

	// Chaos: terminate every backend of the clients every 30-100 ms until
	// the enqueuers are done and most jobs ran (or 8 s passed).
	var kills, rounds int
	chaosEnd := time.Now().Add(8 * time.Second)
	r := rand.New(rand.NewPCG(1, 2))
	for time.Now().Before(chaosEnd) {
		select {
		case <-enqueued:
			if log.done.Load() >= (nBatch+nSingle)*6/10 {
				chaosEnd = time.Time{}
			}
		default:
		}
		var n int
		if err := admin.QueryRow(ctx, "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"+
			" WHERE datname = current_database() AND application_name = $1 AND pid <> pg_backend_pid()", app).Scan(&n); err != nil {
			t.Fatalf("chaos: %v", err)
		}
		kills += n
		rounds++
		<-time.After(time.Duration(30+r.IntN(70)) * time.Millisecond) // the pace of the chaos, not a wait for a state
	}
	<-enqueued
	t.Logf("chaos ended at %s", time.Since(began).Round(time.Millisecond))
	t.Logf("chaos: %d rounds, %d backends terminated; enqueuers saw %d errors, retried %d keyed enqueues, %d unkeyed enqueues failed",
		rounds, kills, enq.errs, enq.retrys, len(enq.lost))
	if kills == 0 {
		t.Fatal("chaos terminated no backend")
	}

	// Drain: every job in the store finishes.
	jobs := pgx.Identifier{schema, "jobs"}.Sanitize()
	attempts := pgx.Identifier{schema, "attempts"}.Sanitize()
	drainBy := time.Now().Add(30 * time.Second)
	for {
		var open int
		if err := admin.QueryRow(ctx, "SELECT count(*) FROM "+jobs+" WHERE state NOT IN ('completed', 'dead', 'cancelled')").Scan(&open); err != nil {
			t.Fatal(err)
		}
		if open == 0 {
			break
		}
		if time.Now().After(drainBy) {
			var running int
			_ = admin.QueryRow(ctx, "SELECT count(*) FROM "+jobs+" WHERE state = 'running'").Scan(&running)
			t.Fatalf("%d jobs unfinished (%d running) 30 s after the chaos", open, running)
		}
		select {
		case <-time.After(50 * time.Millisecond): // poll interval
		case <-ctx.Done():
		}
	}

	t.Logf("drained at %s", time.Since(began).Round(time.Millisecond))

	// The store: one job per seq, all completed.
	rows, err := admin.Query(ctx, "SELECT id, (args->>'seq')::int, state, attempt, idempotency_key FROM "+jobs)
	if err != nil {
		t.Fatal(err)
	}
	type jobRow struct {
		id      int64
		seq     int
		state   string
		attempt int64
		key     string
	}
	bySeq := map[int][]jobRow{}
	byID := map[int64]jobRow{}
	var j jobRow
	if _, err := pgx.ForEachRow(rows, []any{&j.id, &j.seq, &j.state, &j.attempt, &j.key}, func() error {
		bySeq[j.seq] = append(bySeq[j.seq], j)
		byID[j.id] = j
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for seq := range nBatch + nSingle {
		js := bySeq[seq]
		id, answered := enq.ids[seq]
		switch {
		case len(js) > 1:
			t.Errorf("seq %d (keyed %v): %d jobs", seq, enq.keyed[seq], len(js))
		case answered && (len(js) != 1 || js[0].id != id):
			t.Errorf("seq %d: the API answered job %d, the store has %v", seq, id, js)
		case !answered && !enq.lost[seq]:
			t.Errorf("seq %d: never answered", seq)
		}
		for _, j := range js {
			if j.state != string(idem.StateCompleted) {
				t.Errorf("job %d (seq %d) ended %s", j.id, seq, j.state)
			}
		}
	}

	// The handler log against the attempt rows.
	type attemptKey struct{ job, attempt int64 }
	outcome := map[attemptKey]string{}
	rows, err = admin.Query(ctx, "SELECT job_id, attempt, outcome, error FROM "+attempts)
	if err != nil {
		t.Fatal(err)
	}
	var a attemptKey
	var out, errText string
	var rescued, released int
	if _, err := pgx.ForEachRow(rows, []any{&a.job, &a.attempt, &out, &errText}, func() error {
		if out == string(idemtype.OutcomeReleased) {
			// A claim whose answer was lost, given back: no handler ran
			// and the attempt's number is used again by the next claim.
			released++
			return nil
		}
		if prev, dup := outcome[a]; dup {
			t.Errorf("job %d attempt %d recorded twice (%s, %s)", a.job, a.attempt, prev, out)
		}
		outcome[a] = out
		if out == string(idemtype.OutcomeLost) && errText == store.RescuedError {
			rescued++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	log.mu.Lock()
	runs := append([]chaosRun(nil), log.runs...)
	log.mu.Unlock()
	started := map[attemptKey]chaosRun{}
	for _, run := range runs {
		k := attemptKey{run.job, run.attempt}
		if _, dup := started[k]; dup {
			t.Errorf("job %d attempt %d ran twice", run.job, run.attempt)
		}
		started[k] = run
		j, ok := byID[run.job]
		switch {
		case !ok:
			t.Errorf("job %d ran but is not in the store", run.job)
		case run.attempt > j.attempt:
			t.Errorf("job %d ran attempt %d after it completed in attempt %d", run.job, run.attempt, j.attempt)
		case run.attempt < j.attempt && run.ok && outcome[k] != string(idemtype.OutcomeLost):
			t.Errorf("job %d attempt %d ran to a result but is recorded %q, not lost", run.job, run.attempt, outcome[k])
		}
	}
	for id, j := range byID {
		if run := started[attemptKey{id, j.attempt}]; !run.ok {
			t.Errorf("job %d completed in attempt %d, which never ran to a result", id, j.attempt)
		}
		for at := int64(1); at < j.attempt; at++ {
			if _, ok := outcome[attemptKey{id, at}]; !ok {
				t.Errorf("job %d completed in attempt %d but attempt %d has no record", id, j.attempt, at)
			}
		}
	}
	t.Logf("%d jobs, %d handler runs, %d attempts lost to expired leases and rescued, %d claims' attempts given back",
		len(byID), len(runs), rescued, released)
}

// withAppName returns url with the given application_name.
func withAppName(t *testing.T, raw, app string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	return u.String()
}
