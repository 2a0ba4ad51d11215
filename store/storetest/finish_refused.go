package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// testFinishRefusedAlone: a finish whose data a backend cannot hold as given
// (a result that is not UTF-8 or not JSON, an error text or code with a NUL
// byte or bytes that are not UTF-8) is refused alone with an error wrapping
// ErrInvalid (store.FinishCheck); the other finishes of the call are
// written, and the refused job is still running under its lease, so a
// valid finish of it goes through afterwards. PostgreSQL used to fail the
// whole call instead, and SQLite to store the bytes.
func testFinishRefusedAlone(t *testing.T, s store.Store) {
	jobs := make([]*store.JobInsertParams, 7)
	for i := range jobs {
		jobs[i] = newJob("k")
	}
	insertNew(t, s, at(0), jobs...)
	c := claim(t, s, at(0), len(jobs))
	fin := at(time.Second)
	badUTF8 := completion(c[1], "\"caf\xe9\"", fin)
	notJSON := completion(c[2], `{"a":`, fin)
	nulError := failure(c[3], idemtype.StateDead, idemtype.OutcomeDead, "boom\x00", time.Time{}, fin)
	badError := failure(c[4], idemtype.StateRetryable, idemtype.OutcomeFailed, "bo\xffom", at(time.Hour), fin)
	nulCode := failure(c[5], idemtype.StateDead, idemtype.OutcomeDead, "boom", time.Time{}, fin)
	nulCode.ErrorCode = "co\x00de"
	escaped := completion(c[6], `{"s":"a\u0000b"}`, fin) // a JSON escape, not a NUL byte: kept
	errs := finishAll(t, s, completion(c[0], `1`, fin), badUTF8, notJSON, nulError, badError, nulCode, escaped)
	wantOK(t, "valid completion", errs[0])
	wantOK(t, "completion with an escaped NUL", errs[6])
	for i, what := range []string{"", "result not UTF-8", "result not JSON", "error with NUL", "error not UTF-8", "code with NUL"} {
		if i == 0 {
			continue
		}
		if !errors.Is(errs[i], idemtype.ErrInvalid) {
			t.Errorf("%s: error %v, want ErrInvalid", what, errs[i])
		}
		wantState(t, s, c[i].ID, idemtype.StateRunning)
	}
	wantState(t, s, c[0].ID, idemtype.StateCompleted)
	if got := wantState(t, s, c[6].ID, idemtype.StateCompleted); !store.SameResult(got.Result, []byte(`{"s":"a\u0000b"}`)) {
		t.Errorf("result with an escaped NUL read back as %s", got.Result)
	}
	// The refused jobs still hold their leases: a valid finish goes through.
	finish1(t, s, failure(c[3], idemtype.StateDead, idemtype.OutcomeDead, "boom", time.Time{}, at(2*time.Second)))
	if got := wantState(t, s, c[3].ID, idemtype.StateDead); got.LastError != "boom" {
		t.Errorf("LastError %q after the valid finish, want boom", got.LastError)
	}
}
