package idemhttp_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/pgstore"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// sqlOpener opens a fresh store and returns it with a function that runs a
// statement on its database directly ("jobs", "attempts" unqualified: the
// PostgreSQL schema is set for it).
type sqlOpener func(t *testing.T) (store.Store, func(q string, args ...any))

func openSQLiteWithSQL(t *testing.T) (store.Store, func(string, ...any)) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "idem.db")
	st, err := sqlitestore.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return st, func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func openPostgresWithSQL(t *testing.T) (store.Store, func(string, ...any)) {
	t.Helper()
	st := openPostgres(t).(*pgstore.Store)
	schema := pgx.Identifier{st.Schema()}.Sanitize()
	return st, func(q string, args ...any) {
		t.Helper()
		q = strings.NewReplacer("jobs", schema+".jobs", "attempts", schema+".attempts").Replace(q)
		if _, err := st.Pool().Exec(context.Background(), q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// bigDoc is a JSON object of n bytes in all.
func bigDoc(n int) json.RawMessage {
	return json.RawMessage(`{"s":"` + strings.Repeat("x", n-len(`{"s":""}`)) + `"}`)
}

// TestOldLongErrorsAreCutWhenRead (both stores): an error text stored
// before errors were cut to store.MaxErrorBytes (here 200 KiB of control
// characters, written into the job's last_error and an attempt's error
// with SQL) is read cut — by the Go API (JobGet, JobAttempts) and over
// HTTP (the job, its attempts) — on a UTF-8 boundary, ending with the
// marker store.StorableError writes. And a one-job reply carrying it with
// the largest args, metadata and result stays within the cap up to which
// the Idempotency-Key middleware stores it: the retry of the complete is
// replayed. Before the fix the whole text came back (1.2 MB of \u0001
// escapes in JSON), the complete's reply was over the cap, not stored, and
// its retry ran again.
func TestOldLongErrorsAreCutWhenRead(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]sqlOpener{"sqlite": openSQLiteWithSQL, "postgres": openPostgresWithSQL} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var exec func(string, ...any)
			e := setup(t, func(t *testing.T) store.Store {
				st, x := open(t)
				exec = x
				return st
			}, nil)
			const size = 200 << 10
			long := strings.Repeat("\x01", size-len("é")) + "é" // a 2-byte rune at the end
			marker := fmt.Sprintf(" …[cut: %d bytes in all]", size)
			checkCut := func(what, got string) {
				t.Helper()
				if len(got) > store.MaxErrorBytes || !strings.HasSuffix(got, marker) || !strings.HasPrefix(got, "\x01\x01") {
					t.Errorf("%s: %d bytes ending %q, want at most %d ending %q", what, len(got), got[max(len(got)-40, 0):], store.MaxErrorBytes, marker)
				}
			}

			res, err := e.client.EnqueueRaw(ctx, idem.EnqueueParams{Kind: "k", Args: bigDoc(idem.MaxArgsBytes - 64),
				Opts: &idem.EnqueueOpts{Tenant: "a", Queue: "q", Metadata: bigDoc(idem.MaxArgsBytes - 64)}})
			if err != nil {
				t.Fatal(err)
			}
			id := res.Job.ID
			jobs, err := e.client.Claim(ctx, idem.ClaimParams{Tenant: "a", Queues: []string{"q"}, WorkerID: "w", Lease: time.Hour})
			if err != nil || len(jobs) != 1 {
				t.Fatalf("claim: %v %v", jobs, err)
			}
			exec(`UPDATE jobs SET last_error = $1 WHERE id = $2`, long, id)
			exec(`INSERT INTO attempts (job_id, attempt, started_at, finished_at, outcome, error) VALUES ($1, 1, $2, $2, 'failed', $3)`,
				id, startedAt(name), long)

			row, err := e.client.JobGet(ctx, "a", id)
			if err != nil {
				t.Fatal(err)
			}
			checkCut("JobGet's LastError", row.LastError)
			attempts, err := e.client.JobAttempts(ctx, "a", id)
			if err != nil || len(attempts) == 0 {
				t.Fatalf("attempts: %v %v", attempts, err)
			}
			checkCut("JobAttempts' Error", attempts[0].Error)

			path := "/v1/jobs/" + strconv.FormatInt(id, 10)
			r := e.req("GET", path, e.keyA, nil)
			expect(t, r, 200, "")
			lastErr, _ := r.json(t)["last_error"].(string)
			checkCut("GET job's last_error", lastErr)
			r = e.req("GET", path+"/attempts", e.keyA, nil)
			expect(t, r, 200, "")
			var list struct {
				Attempts []struct {
					Error string `json:"error"`
				} `json:"attempts"`
			}
			if err := json.Unmarshal(r.body, &list); err != nil || len(list.Attempts) == 0 {
				t.Fatalf("attempts: %v %s", err, r.body[:min(len(r.body), 200)])
			}
			checkCut("GET attempts' error", list.Attempts[0].Error)

			body := map[string]any{"lease_token": jobs[0].LeaseToken, "result": bigDoc(idem.MaxArgsBytes - 256)}
			first := e.req("POST", path+"/complete", e.keyA, body, "Idempotency-Key", "done-1")
			expect(t, first, 200, "")
			again := e.req("POST", path+"/complete", e.keyA, body, "Idempotency-Key", "done-1")
			expect(t, again, 200, "")
			if again.header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("the retry of the complete (%d bytes of reply) was not replayed: the middleware did not store the reply", len(first.body))
			}
		})
	}
}

// startedAt is a time in the column form of the store called name.
func startedAt(name string) any {
	if name == "sqlite" {
		return time.Now().UnixMicro()
	}
	return time.Now()
}
