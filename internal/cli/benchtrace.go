package cli

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/pgstore"
)

// claimTracer records the statements the store runs while armed, so that
// bench-growth can EXPLAIN the claim exactly as the store sends it,
// whatever the store's SQL is today.
type claimTracer struct {
	armed atomic.Bool
	mu    sync.Mutex
	stmts []tracedStmt
}

// tracedStmt is one statement and its arguments.
type tracedStmt struct {
	sql  string
	args []any
}

func (t *claimTracer) record(sql string, args []any) {
	if !t.armed.Load() {
		return
	}
	t.mu.Lock()
	t.stmts = append(t.stmts, tracedStmt{sql, args})
	t.mu.Unlock()
}

// TraceQueryStart implements pgx.QueryTracer.
func (t *claimTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	t.record(d.SQL, d.Args)
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (t *claimTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart implements pgx.BatchTracer.
func (t *claimTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

// TraceBatchQuery implements pgx.BatchTracer.
func (t *claimTracer) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	t.record(d.SQL, d.Args)
}

// TraceBatchEnd implements pgx.BatchTracer.
func (t *claimTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// explainClaim runs one claim of n with the tracer armed, then EXPLAIN
// (ANALYZE, BUFFERS) of each data statement it ran, in a transaction that
// is rolled back.
func explainClaim(ctx context.Context, db *benchDB, url string, tr *claimTracer, n int) (string, error) {
	tr.mu.Lock()
	tr.stmts = nil
	tr.mu.Unlock()
	tr.armed.Store(true)
	_, err := db.st.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"bench"}, WorkerID: "growth-explain", Limit: n,
		LeaseUntil: time.Now().Add(time.Minute)})
	tr.armed.Store(false)
	if err != nil {
		return "", fmt.Errorf("claim: %w", err)
	}
	conn, err := pgstore.Connect(ctx, url)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var b strings.Builder
	tr.mu.Lock()
	stmts := tr.stmts
	tr.mu.Unlock()
	for i, s := range stmts {
		head := strings.ToUpper(strings.TrimSpace(s.sql))
		if !strings.HasPrefix(head, "SELECT") && !strings.HasPrefix(head, "WITH") && !strings.HasPrefix(head, "UPDATE") {
			continue
		}
		plan, err := explainOne(ctx, conn, s)
		if err != nil {
			return "", fmt.Errorf("statement %d: %w", i+1, err)
		}
		fmt.Fprintf(&b, "-- statement %d of the claim: %s\n%s\n", i+1, oneLine(s.sql, 160), plan)
	}
	return b.String(), nil
}

func explainOne(ctx context.Context, conn *pgx.Conn, s tracedStmt) (string, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	// The store runs its claims with JIT off (a JIT compile after ANALYZE
	// took hundreds of milliseconds); the plan shown must be the one it gets.
	if _, err := tx.Exec(ctx, "SET LOCAL jit = off"); err != nil {
		return "", err
	}
	rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) "+s.sql, s.args...)
	if err != nil {
		return "", err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", err
	}
	return strings.Join(lines, "\n"), nil
}

// oneLine squeezes the whitespace of s and cuts it to n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + " …"
	}
	return s
}

// loadAvg returns the 1, 5 and 15 minute load averages, or "n/a".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "n/a"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "n/a"
	}
	return strings.Join(f[:3], " ")
}
