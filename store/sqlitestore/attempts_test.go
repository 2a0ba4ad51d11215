package sqlitestore

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// attemptRows counts the stored attempt rows of a job (the running attempt
// is not one of them).
func attemptRows(t *testing.T, s *Store, id int64) int {
	t.Helper()
	var n int
	if err := s.rdb.QueryRowContext(context.Background(), `SELECT count(*) FROM attempts WHERE job_id = ?`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestAttemptRowWrittenAtEnd: a claim stores no attempt row (AttemptList
// shows the running attempt from the job row); a batched finish of more
// items than one statement binds stores exactly one row each, and a repeat
// of the batch stores nothing more.
func TestAttemptRowWrittenAtEnd(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	ctx := context.Background()
	const n = finishChunk + 3 // two chunks, the second padded
	ps := make([]*store.JobInsertParams, n)
	for i := range ps {
		ps[i] = job("k")
	}
	insert(t, s, t0, ps...)
	jobs := claim(t, s, t0, n)
	if len(jobs) != n {
		t.Fatalf("claimed %d, want %d", len(jobs), n)
	}
	if got := attemptRows(t, s, jobs[0].ID); got != 0 {
		t.Errorf("attempt rows after claim: %d, want 0", got)
	}
	as, err := s.AttemptList(ctx, &store.AttemptListParams{Tenant: "", JobID: jobs[0].ID})
	if err != nil || len(as) != 1 || as[0].Outcome != idemtype.OutcomeRunning || as[0].Attempt != 1 ||
		as[0].WorkerID != "w" || !as[0].StartedAt.Equal(t0) || as[0].FinishedAt != nil {
		t.Fatalf("running attempts: %v %+v", err, as)
	}
	fin := make([]*store.JobFinishParams, n)
	for i, j := range jobs {
		fin[i] = &store.JobFinishParams{ID: j.ID, LeaseToken: j.LeaseToken, State: idemtype.StateCompleted,
			Outcome: idemtype.OutcomeCompleted, Result: json.RawMessage(`{"i":1}`), FinishedAt: t0.Add(time.Second),
			DurationMS: 1000, HTTPStatus: 200, Target: "x"}
	}
	for range 2 { // the second run repeats every completion
		errs, err := s.JobFinishMany(ctx, fin)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range errs {
			if e != nil {
				t.Fatalf("finish %d: %v", i, e)
			}
		}
	}
	for _, j := range jobs {
		if got := attemptRows(t, s, j.ID); got != 1 {
			t.Fatalf("job %d: %d attempt rows, want 1", j.ID, got)
		}
	}
	as, err = s.AttemptList(ctx, &store.AttemptListParams{Tenant: "", JobID: jobs[n-1].ID})
	if err != nil || len(as) != 1 {
		t.Fatalf("attempts: %v %+v", err, as)
	}
	if a := as[0]; a.Attempt != 1 || a.Outcome != idemtype.OutcomeCompleted || a.WorkerID != "w" ||
		!a.StartedAt.Equal(t0) || a.FinishedAt == nil || !a.FinishedAt.Equal(t0.Add(time.Second)) ||
		a.DurationMS != 1000 || a.HTTPStatus != 200 || a.Target != "x" {
		t.Errorf("attempt %+v", a)
	}
	if got := getJob(t, s, jobs[n-1].ID); got.State != idemtype.StateCompleted || string(got.Result) != `{"i":1}` {
		t.Errorf("job %s result %s", got.State, got.Result)
	}
}

// TestMigrateRunningAttempts: a database written before 0005 holds a row
// for each running attempt; the migration removes it, so the attempt is
// listed once and stored once when it ends.
func TestMigrateRunningAttempts(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	ctx := context.Background()
	r := insert(t, s, t0, job("k"))
	j := claim(t, s, t0, 1)[0]
	// The state an earlier version left: the running attempt's row, and
	// 0005 not applied yet.
	err := s.write(ctx, 1, func(w *wtx) error {
		if _, err := w.exec(`INSERT INTO attempts (job_id, attempt, started_at, outcome, worker_id)
SELECT id, attempt, started_at, 'running', worker_id FROM jobs WHERE id = ?`, j.ID); err != nil {
			return err
		}
		_, err := w.exec(`DELETE FROM schema_migrations WHERE version = 5`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	as, err := s.AttemptList(ctx, &store.AttemptListParams{Tenant: "", JobID: r[0].Job.ID})
	if err != nil || len(as) != 1 || as[0].Outcome != idemtype.OutcomeRunning {
		t.Fatalf("attempts after migrate: %v %+v", err, as)
	}
	finish(t, s, j, idemtype.StateCompleted, t0.Add(time.Second))
	as, err = s.AttemptList(ctx, &store.AttemptListParams{Tenant: "", JobID: j.ID})
	if err != nil || len(as) != 1 || as[0].Outcome != idemtype.OutcomeCompleted || as[0].Attempt != 1 {
		t.Fatalf("attempts after finish: %v %+v", err, as)
	}
}

// TestFinishBatchAttemptsByItem: a batched finish skips the attempt
// statement only when no item can write a row. A chunk of plain
// completions stores none; a failure or a delivery among completions
// stores its own row, and the completions still none.
func TestFinishBatchAttemptsByItem(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	ctx := context.Background()
	ps := make([]*store.JobInsertParams, 9)
	for i := range ps {
		ps[i] = job("k")
	}
	insert(t, s, t0, ps...)
	jobs := claim(t, s, t0, len(ps))
	if len(jobs) != len(ps) {
		t.Fatalf("claimed %d, want %d", len(jobs), len(ps))
	}
	completed := func(j *idemtype.JobRow) *store.JobFinishParams {
		return &store.JobFinishParams{ID: j.ID, LeaseToken: j.LeaseToken, State: idemtype.StateCompleted,
			Outcome: idemtype.OutcomeCompleted, Result: json.RawMessage(`{}`), FinishedAt: t0.Add(time.Second), DurationMS: 1}
	}
	failed := completed(jobs[4])
	failed.State, failed.Outcome, failed.Error, failed.RunAt, failed.Result =
		idemtype.StateRetryable, idemtype.OutcomeFailed, "boom", t0.Add(time.Minute), nil
	delivered := completed(jobs[7])
	delivered.Target, delivered.HTTPStatus = "x", 204
	batches := [][]*store.JobFinishParams{
		{completed(jobs[0]), completed(jobs[1]), completed(jobs[2])},
		{completed(jobs[3]), failed, completed(jobs[5])},
		{completed(jobs[6]), delivered, completed(jobs[8])},
	}
	for _, b := range batches {
		errs, err := s.JobFinishMany(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range errs {
			if e != nil {
				t.Fatalf("finish %d: %v", b[i].ID, e)
			}
		}
	}
	for i, j := range jobs {
		want := 0
		if i == 4 || i == 7 {
			want = 1
		}
		if got := attemptRows(t, s, j.ID); got != want {
			t.Errorf("job %d: %d attempt rows, want %d", i, got, want)
		}
	}
	as, err := s.AttemptList(ctx, &store.AttemptListParams{Tenant: "", JobID: jobs[4].ID})
	if err != nil || len(as) != 1 || as[0].Outcome != idemtype.OutcomeFailed || as[0].Error != "boom" {
		t.Errorf("failed attempt: %v %+v", err, as)
	}
	if got := getJob(t, s, jobs[4].ID); got.State != idemtype.StateRetryable {
		t.Errorf("failed job state %s", got.State)
	}
}
