package maintenance_test

import (
	"bytes"
	"context"
	"database/sql"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/maintenance"
	"github.com/idem-dev/idem/internal/sqlitetest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// lockedBuffer is a log sink safe for concurrent writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestRescuerRepairsMissedRelease: a job left pending although its
// dependency completed (the release missed: written here into the SQLite
// file directly, as a node of an older version or a bug would leave it)
// is released by the rescuer's run once it is pending longer than the
// grace, the queues are woken, and the repair is logged at Warn with the
// job's id.
func TestRescuerRepairsMissedRelease(t *testing.T) {
	ctx := context.Background()
	path := sqlitetest.Path(t)
	st, err := sqlitestore.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	dep := insert(t, st, base, 1, "")[0]
	res, err := st.JobInsertMany(ctx, &store.JobInsertManyParams{Now: base, Jobs: []*store.JobInsertParams{{
		Tenant: "t", Queue: "q", Kind: "after", Args: []byte("{}"), MaxAttempts: 1, RunAt: base, DependsOn: []int64{dep.ID}}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("insert dependant: %v %v", err, res[0].Err)
	}
	after := res[0].Job
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`UPDATE jobs SET state = 'completed', finished_at = ? WHERE id = ?`,
		base.Add(time.Second).UnixMicro(), dep.ID); err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	var clk clock
	clk.Set(base.Add(30 * time.Second))
	var woken int
	r := maintenance.NewRescuer(st, &maintenance.Config{Now: clk.Now,
		Logger:    slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
		OnPromote: func([]string) { woken++ }})
	if n, err := r.RunOnce(ctx); err != nil || n != 0 {
		t.Fatalf("run within the grace: %d, %v; want 0", n, err)
	}
	wantJobState(t, st, after.ID, idemtype.StatePending)
	clk.Set(base.Add(2 * time.Minute))
	if n, err := r.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("run after the grace: %d, %v; want 1", n, err)
	}
	wantJobState(t, st, after.ID, idemtype.StateAvailable)
	if woken != 1 {
		t.Errorf("queues woken %d times, want once", woken)
	}
	if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, strconv.FormatInt(after.ID, 10)) {
		t.Errorf("log %q: want a warning naming job %d", out, after.ID)
	}
	if n, err := r.RunOnce(ctx); err != nil || n != 0 {
		t.Errorf("run after the repair: %d, %v; want 0", n, err)
	}
}

func wantJobState(t *testing.T, st store.Store, id int64, want idemtype.JobState) {
	t.Helper()
	j, err := st.JobGet(context.Background(), &store.JobGetParams{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	if j.State != want {
		t.Fatalf("job %d: %s, want %s", id, j.State, want)
	}
}
