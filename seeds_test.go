package idem_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/key"
)

// Seed-fidelity behaviours of the Go API (issue 12).

func TestValidateKey(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		key      string
		keyOK    bool
		nameOK   bool
		wantText string
	}{
		{"plain", "order-1234", true, true, ""},
		{"space", "order 1234", true, false, ""},
		{"tilde and bang", "!~", true, true, ""},
		{"255 characters", strings.Repeat("k", 255), true, true, ""},
		{"256 characters", strings.Repeat("k", 256), false, false, "1 to 255"},
		{"empty", "", false, false, ""},
		{"control character", "a\x01b", false, false, "printable"},
		{"NUL", "a\x00b", false, false, "printable"},
		{"DEL", "a\x7f", false, false, "printable"},
		{"UTF-8", "clé", false, false, "printable"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := idem.ValidateKey("idempotency_key", c.key)
			if (err == nil) != c.keyOK {
				t.Fatalf("ValidateKey(%q) = %v, want ok %v", c.key, err, c.keyOK)
			}
			if err != nil && (!errors.Is(err, idem.ErrInvalid) || !strings.Contains(err.Error(), c.wantText)) {
				t.Fatalf("ValidateKey(%q) = %v, want an ErrInvalid mentioning %q", c.key, err, c.wantText)
			}
			if err := idem.ValidateName("queue", c.key); (err == nil) != c.nameOK {
				t.Fatalf("ValidateName(%q) = %v, want ok %v", c.key, err, c.nameOK)
			}
		})
	}
}

func TestEnqueueKeyValidationWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	for _, k := range []string{strings.Repeat("x", 256), "bad\nkey"} {
		_, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "k", Opts: &idem.EnqueueOpts{IdempotencyKey: k}})
		var inv *idemtype.InvalidError
		if !errors.As(err, &inv) || inv.Field != "idempotency_key" {
			t.Fatalf("key %q: err %v, want an InvalidError on idempotency_key", k, err)
		}
	}
	if jobs, _, err := b.client.JobList(ctx, &idem.JobListParams{}); err != nil || len(jobs) != 0 {
		t.Fatalf("jobs after refused enqueues: %d (%v)", len(jobs), err)
	}
}

func TestDedupForever(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	b := setup(t, &idem.Config{DedupWindow: idem.DedupForever, Now: clock.Now})
	ctx := context.Background()
	p := idem.EnqueueParams{Kind: "upload", Args: []byte(`{"file":"a.csv"}`), Opts: &idem.EnqueueOpts{IdempotencyKey: "upload-a"}}
	first, err := b.client.EnqueueRaw(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.JobCancel(ctx, "", first.Job.ID); err != nil {
		t.Fatal(err)
	}
	clock.Add(50 * 365 * 24 * time.Hour) // fifty years later the key still holds
	again, err := b.client.EnqueueRaw(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Existing || again.Job.ID != first.Job.ID {
		t.Fatalf("after fifty years: existing %v job %d, want the first job %d", again.Existing, again.Job.ID, first.Job.ID)
	}
	rec, err := b.client.RecordGet(ctx, "", "upload-a")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != idemtype.RecordFailed || rec.DedupUntil == nil || rec.DedupUntil.Year() < 2125 {
		t.Fatalf("record: status %s dedup until %v", rec.Status, rec.DedupUntil)
	}
}

// GeoArgs is the args type of the dead-letter tests.
type GeoArgs struct {
	Fence string `json:"fence"`
}

func (GeoArgs) Kind() string { return "geo" }

func TestJobErrorCodeAndResolve(t *testing.T) {
	t.Parallel()
	workers := idem.NewWorkers()
	idem.AddWorker(workers, idem.WorkFunc[GeoArgs](func(ctx context.Context, job *idem.Job[GeoArgs]) (any, error) {
		return nil, idem.JobPermanent(idem.JobErrorCode("GEO_INVALID_POLYGON", errors.New("ring not closed")))
	}))
	b := setup(t, &idem.Config{Workers: workers, Queues: queues(2)})
	b.start(t)
	ctx := context.Background()
	res, err := b.client.Enqueue(ctx, GeoArgs{Fence: "f1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dead := waitState(t, b, res.Job.ID, idem.StateDead)
	if dead.ErrorCode != "GEO_INVALID_POLYGON" || !strings.Contains(dead.LastError, "ring not closed") {
		t.Fatalf("dead job: code %q error %q", dead.ErrorCode, dead.LastError)
	}
	jobs, _, err := b.client.JobList(ctx, &idem.JobListParams{Filter: idem.JobFilter{
		States: []idem.JobState{idem.StateDead}, ErrorCode: "GEO_INVALID_POLYGON"}})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("dlq by code: %d jobs (%v)", len(jobs), err)
	}
	t.Run("resolve a job that is not dead", func(t *testing.T) {
		live, err := b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "nobody", Opts: &idem.EnqueueOpts{Queue: "idle"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.client.DLQResolve(ctx, "", live.Job.ID, "no"); !errors.Is(err, idem.ErrWrongState) {
			t.Fatalf("resolve an available job: %v, want ErrWrongState", err)
		}
		if _, err := b.client.DLQResolve(ctx, "", 987654, "no"); !errors.Is(err, idem.ErrNotFound) {
			t.Fatalf("resolve an unknown job: %v, want ErrNotFound", err)
		}
		if _, err := b.client.DLQResolve(ctx, "", dead.ID, "bad\x00note"); !errors.Is(err, idem.ErrInvalid) {
			t.Fatalf("resolve with a NUL in the note: %v, want ErrInvalid", err)
		}
	})
	got, err := b.client.DLQResolve(ctx, "", dead.ID, "polygon fixed at the source")
	if err != nil {
		t.Fatal(err)
	}
	if got.ResolvedAt == nil || got.ResolutionNote != "polygon fixed at the source" || got.State != idem.StateDead {
		t.Fatalf("resolved: %+v", got)
	}
	stats, err := b.client.QueueStats(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range stats {
		if q.Queue == idem.DefaultQueue && (q.DeadUnresolved != 0 || q.Counts[idem.StateDead] != 1) {
			t.Fatalf("stats after resolve: unresolved %d dead %d", q.DeadUnresolved, q.Counts[idem.StateDead])
		}
	}
}

// lockedBuffer is a log sink safe for concurrent writers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestDoReportsAndLogs(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	clock := &fakeClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	b := setup(t, &idem.Config{Now: clock.Now,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	ctx := context.Background()
	runs := 0
	fn := func(context.Context) (any, error) {
		runs++
		clock.Add(1500 * time.Millisecond) // the geoprocessing takes 1.5 s
		return map[string]int{"features": 42}, nil
	}
	first, err := b.client.Do(ctx, "geo:job-1", fn, nil)
	if err != nil {
		t.Fatal(err)
	}
	if first.WasCached || first.Key != "geo:job-1" || first.Duration != 1500*time.Millisecond || first.StoredAt == nil {
		t.Fatalf("first: %+v", first)
	}
	second, err := b.client.Do(ctx, "geo:job-1", fn, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !second.WasCached || runs != 1 || second.Duration != first.Duration || !second.StoredAt.Equal(*first.StoredAt) ||
		string(second.Result) != `{"features":42}` {
		t.Fatalf("second: %+v (runs %d)", second, runs)
	}
	if _, err := b.client.Do(ctx, "geo:job-2", func(context.Context) (any, error) { return nil, errors.New("boom") }, nil); err == nil {
		t.Fatal("a failing fn returned no error")
	}
	for _, want := range []string{`msg="result cache miss" key=geo:job-1`, `msg="result stored" key=geo:job-1`,
		`msg="result cache hit" key=geo:job-1`, `msg="result failure not cached" key=geo:job-2`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, logs.String())
		}
	}
}

func TestAutoKey(t *testing.T) {
	t.Parallel()
	b := setup(t, &idem.Config{
		AutoKeyByQueue: map[string]idem.AutoKey{"notifications": {}},
		AutoKeyByKind:  map[string]idem.AutoKey{"send_email": {Action: "send_email", NoTenant: true}},
	})
	ctx := context.Background()
	enqueue := func(kind, queue, meta, args string) (*idem.EnqueueResult, error) {
		return b.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: kind, Args: json.RawMessage(args),
			Opts: &idem.EnqueueOpts{Queue: queue, Metadata: json.RawMessage(meta)}})
	}
	first, err := enqueue("send_email", "", `{"user":"user-1"}`, `{"to":"a@x","template":"welcome"}`)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := key.Scoped("", "user-1", "send_email", []byte(`{"template":"welcome","to":"a@x"}`))
	if first.Job.IdempotencyKey != want || !strings.HasPrefix(want, "_user-1_send_email_") {
		t.Fatalf("derived key %q, want %q", first.Job.IdempotencyKey, want)
	}
	again, err := enqueue("send_email", "", `{"user":"user-1"}`, `{"template":"welcome","to":"a@x"}`)
	if err != nil || !again.Existing || again.Job.ID != first.Job.ID {
		t.Fatalf("same user and args: %+v %v", again, err)
	}
	other, err := enqueue("send_email", "", `{"user":"user-2"}`, `{"to":"a@x","template":"welcome"}`)
	if err != nil || other.Existing {
		t.Fatalf("another user: %+v %v", other, err)
	}
	byQueue, err := enqueue("push", "notifications", ``, `{"n":1}`)
	if err != nil || byQueue.Job.IdempotencyKey != mustScoped(t, "default", "", "push", `{"n":1}`) {
		t.Fatalf("by queue: %+v %v", byQueue, err)
	}
	plain, err := enqueue("push", "other", ``, `{"n":1}`)
	if err != nil || plain.Job.IdempotencyKey != "" {
		t.Fatalf("unconfigured queue got key %q (%v)", plain.Job.IdempotencyKey, err)
	}
	t.Run("bad user writes nothing", func(t *testing.T) {
		var inv *idemtype.InvalidError
		if _, err := enqueue("send_email", "", `{"user":"a_b"}`, `{}`); !errors.As(err, &inv) || inv.Field != "metadata.user" {
			t.Fatalf("user with '_': %v", err)
		}
		if _, err := enqueue("send_email", "", `{"user":7}`, `{}`); !errors.As(err, &inv) || inv.Field != "metadata.user" {
			t.Fatalf("numeric user: %v", err)
		}
		if jobs, _, _ := b.client.JobList(ctx, &idem.JobListParams{}); len(jobs) != 4 {
			t.Fatalf("%d jobs, want 4", len(jobs))
		}
	})
}

func mustScoped(t *testing.T, tenant, user, action, args string) string {
	t.Helper()
	k, err := key.Scoped(tenant, user, action, []byte(args))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestResultLeaseTakeover(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	b := setup(t, &idem.Config{Now: clock.Now})
	ctx := context.Background()
	first, err := b.client.ResultLeaseAcquire(ctx, "geo:7", &idem.ResultLeaseOpts{Lease: 30 * time.Second})
	if err != nil || first.Token == "" {
		t.Fatalf("first: %+v %v", first, err)
	}
	if _, err := b.client.ResultLeaseAcquire(ctx, "geo:7", nil); !errors.Is(err, idem.ErrKeyInProgress) {
		t.Fatalf("held key: %v, want ErrKeyInProgress", err)
	}
	clock.Add(31 * time.Second) // the first holder crashed: its lease expires
	second, err := b.client.ResultLeaseAcquire(ctx, "geo:7", nil)
	if err != nil || second.Token == "" || second.Token == first.Token {
		t.Fatalf("takeover: %+v %v", second, err)
	}
	if _, err := b.client.ResultLeaseRenew(ctx, "", "geo:7", first.Token, 0); !errors.Is(err, idem.ErrLeaseLost) {
		t.Fatalf("renew of the lost lease: %v, want ErrLeaseLost", err)
	}
	if _, err := b.client.ResultLeaseComplete(ctx, "", "geo:7", first.Token, json.RawMessage(`1`), 0, 0); !errors.Is(err, idem.ErrLeaseLost) {
		t.Fatalf("complete of the lost lease: %v, want ErrLeaseLost", err)
	}
	// A release by the old holder changes nothing.
	if err := b.client.ResultLeaseRelease(ctx, "", "geo:7", first.Token); err != nil {
		t.Fatal(err)
	}
	clock.Add(2 * time.Second)
	res, err := b.client.ResultLeaseComplete(ctx, "", "geo:7", second.Token, json.RawMessage(`{"n":2}`), time.Hour, 0)
	if err != nil || res.Duration != 2*time.Second {
		t.Fatalf("complete: %+v %v", res, err)
	}
	hit, err := b.client.ResultLeaseAcquire(ctx, "geo:7", nil)
	if err != nil || hit.Cached == nil || string(hit.Cached.Result) != `{"n":2}` {
		t.Fatalf("hit: %+v %v", hit, err)
	}
	clock.Add(61 * time.Minute) // past the result TTL the work runs again
	again, err := b.client.ResultLeaseAcquire(ctx, "geo:7", nil)
	if err != nil || again.Cached != nil {
		t.Fatalf("after the TTL: %+v %v", again, err)
	}
}

// BufferArgs is the args type of the job cache log test: seed 000's
// buffer process.
type BufferArgs struct {
	Layer string `json:"layer"`
}

func (BufferArgs) Kind() string { return "buffer" }

// TestJobCacheLogs is seed 000's log of a worker's keyed jobs (scenarios
// 1-3) and seed 001's log of a duplicate: a miss, the result stored, a
// hit naming the original job, a failure not cached, and an enqueue
// answered by the existing job, each line with its key.
func TestJobCacheLogs(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	workers := idem.NewWorkers()
	idem.AddWorker(workers, idem.WorkFunc[BufferArgs](func(ctx context.Context, job *idem.Job[BufferArgs]) (any, error) {
		if job.Args.Layer == "broken" {
			return nil, idem.JobPermanent(errors.New("bad geometry"))
		}
		return map[string]int{"features_processed": 1200}, nil
	}))
	b := setup(t, &idem.Config{Workers: workers, Queues: queues(1),
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	b.start(t)
	ctx := context.Background()
	zero := time.Duration(0)
	enqueue := func(args BufferArgs, key string) *idem.EnqueueResult {
		t.Helper()
		res, err := b.client.Enqueue(ctx, args, &idem.EnqueueOpts{IdempotencyKey: key, DedupWindow: &zero})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := enqueue(BufferArgs{Layer: "parcels"}, "geo_3a7f4c2b")
	waitState(t, b, first.Job.ID, idem.StateCompleted)
	second := enqueue(BufferArgs{Layer: "parcels"}, "geo_3a7f4c2b")
	if got := waitState(t, b, second.Job.ID, idem.StateCompleted); !got.WasCached || got.OriginalJobID != first.Job.ID {
		t.Fatalf("second job: was_cached %v original %d, want the result of job %d", got.WasCached, got.OriginalJobID, first.Job.ID)
	}
	bad := enqueue(BufferArgs{Layer: "broken"}, "geo_broken")
	waitState(t, b, bad.Job.ID, idem.StateDead)
	// A duplicate within the default window: the existing job answers.
	if _, err := b.client.Enqueue(ctx, BufferArgs{Layer: "x"}, &idem.EnqueueOpts{IdempotencyKey: "upload-1"}); err != nil {
		t.Fatal(err)
	}
	if dup, err := b.client.Enqueue(ctx, BufferArgs{Layer: "x"}, &idem.EnqueueOpts{IdempotencyKey: "upload-1"}); err != nil || !dup.Existing {
		t.Fatalf("duplicate: %+v %v", dup, err)
	}
	job := func(id int64) string { return fmt.Sprintf("job=%d", id) }
	for _, want := range []string{
		`msg="result cache miss" ` + job(first.Job.ID) + ` key=geo_3a7f4c2b`,
		`msg="storing result in the cache" ` + job(first.Job.ID) + ` key=geo_3a7f4c2b`,
		`msg="result cache hit" ` + job(second.Job.ID) + ` key=geo_3a7f4c2b`,
		fmt.Sprintf("original_job=%d", first.Job.ID),
		`msg="result failure not cached" ` + job(bad.Job.ID) + ` key=geo_broken`,
		`msg="duplicate enqueue answered by the existing job" key=upload-1`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, logs.String())
		}
	}
}
