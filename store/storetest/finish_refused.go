package storetest

import (
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// finishItem is one finish of a JobFinishMany call, named by what it tests;
// valid when a store must write it.
type finishItem struct {
	what  string
	p     *store.JobFinishParams
	valid bool
}

// refusedFinishCalls returns two JobFinishMany calls over the running jobs
// c (8 of them) that hold each kind of finish store.FinishCheck refuses
// once, among valid finishes: the first call starts with a refused finish,
// the second with a valid one, so a refusal is seen before and after the
// finishes it must not stop.
func refusedFinishCalls(c []*idemtype.JobRow, fin time.Time) [][]finishItem {
	retry := at(time.Hour)
	nulCode := failure(c[3], idemtype.StateDead, idemtype.OutcomeDead, "boom", time.Time{}, fin)
	nulCode.ErrorCode = "co\x00de"
	badTarget := failure(c[7], idemtype.StateRetryable, idemtype.OutcomeFailed, "503", retry, fin)
	badTarget.Target = "hook\xfe"
	return [][]finishItem{{
		{"error text with a NUL byte", failure(c[0], idemtype.StateRetryable, idemtype.OutcomeFailed, "bad\x00byte", retry, fin), false},
		{"valid completion", completion(c[1], `{"ok":true}`, fin), true},
		{"error text not UTF-8", failure(c[2], idemtype.StateRetryable, idemtype.OutcomeFailed, "bo\xffom", retry, fin), false},
		{"error code with a NUL byte", nulCode, false},
	}, {
		// A JSON escape, not a NUL byte: kept.
		{"completion with an escaped NUL", completion(c[4], `{"s":"a\u0000b"}`, fin), true},
		{"result not UTF-8", completion(c[5], "\"caf\xe9\"", fin), false},
		{"result not JSON", completion(c[6], `{"a":`, fin), false},
		{"target not UTF-8", badTarget, false},
	}}
}

// testFinishRefusedAlone: a finish whose data a backend cannot hold as given
// (a result that is not UTF-8 or not JSON, an error text or code with a NUL
// byte or bytes that are not UTF-8, a target that is not UTF-8) is refused
// alone with an error wrapping ErrInvalid (store.FinishCheck), wherever it
// stands in the call; the other finishes of the call are written, and the
// refused job is still running under its lease, so a valid finish of it
// goes through afterwards. PostgreSQL used to fail the whole call instead,
// and SQLite to store the bytes.
func testFinishRefusedAlone(t *testing.T, s store.Store) {
	jobs := make([]*store.JobInsertParams, 8)
	for i := range jobs {
		jobs[i] = newJob("k")
	}
	insertNew(t, s, at(0), jobs...)
	c := claim(t, s, at(0), len(jobs))
	if len(c) != len(jobs) {
		t.Fatalf("claimed %d jobs, want %d", len(c), len(jobs))
	}
	var refused []*store.JobFinishParams
	for _, call := range refusedFinishCalls(c, at(time.Second)) {
		ps := make([]*store.JobFinishParams, len(call))
		for i, it := range call {
			ps[i] = it.p
		}
		errs := finishAll(t, s, ps...)
		for i, it := range call {
			if it.valid {
				wantOK(t, it.what, errs[i])
				continue
			}
			wantErr(t, it.what, errs[i], idemtype.ErrInvalid)
			wantState(t, s, it.p.ID, idemtype.StateRunning)
			refused = append(refused, it.p)
		}
	}
	wantJSON(t, "the valid completion's result", wantState(t, s, c[1].ID, idemtype.StateCompleted).Result, `{"ok":true}`)
	if got := wantState(t, s, c[4].ID, idemtype.StateCompleted); !store.SameResult(got.Result, []byte(`{"s":"a\u0000b"}`)) {
		t.Errorf("result with an escaped NUL read back as %s", got.Result)
	}
	// The refused jobs still hold their leases: a valid finish goes through.
	for _, p := range refused {
		ok := &store.JobFinishParams{ID: p.ID, LeaseToken: p.LeaseToken, State: idemtype.StateRetryable,
			Outcome: idemtype.OutcomeFailed, Error: "bad byte", RunAt: at(time.Minute), FinishedAt: at(2 * time.Second)}
		finish1(t, s, ok)
		if j := wantState(t, s, p.ID, idemtype.StateRetryable); j.LastError != "bad byte" {
			t.Errorf("job %d: last error %q after a valid finish", p.ID, j.LastError)
		}
	}
}
