package storetest

import (
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// finishTextCases: a finish whose text no store can hold (store.FinishCheck)
// is refused alone; the other finishes of its batch are written.
func finishTextCases() []testCase {
	return []testCase{
		{"JobFinishMany/unstorable_text_refused_alone", testFinishUnstorableText},
	}
}

func testFinishUnstorableText(t *testing.T, s store.Store) {
	kinds := []string{"good", "nul", "utf8", "json", "code", "target"}
	var ps []*store.JobInsertParams
	for _, k := range kinds {
		ps = append(ps, newJob(k))
	}
	insertNew(t, s, at(0), ps...)
	run := map[string]*idemtype.JobRow{}
	for _, j := range claim(t, s, at(time.Second), len(kinds)) {
		run[j.Kind] = j
	}
	if len(run) != len(kinds) {
		t.Fatalf("claimed %d jobs, want %d", len(run), len(kinds))
	}
	fin, retry := at(2*time.Second), at(time.Minute)
	bad := map[string]*store.JobFinishParams{
		"nul":    failure(run["nul"], idemtype.StateRetryable, idemtype.OutcomeFailed, "bad\x00byte", retry, fin),
		"utf8":   failure(run["utf8"], idemtype.StateRetryable, idemtype.OutcomeFailed, "bad\xffbyte", retry, fin),
		"json":   completion(run["json"], `not json`, fin),
		"code":   failure(run["code"], idemtype.StateDead, idemtype.OutcomeDead, "x", time.Time{}, fin),
		"target": failure(run["target"], idemtype.StateRetryable, idemtype.OutcomeFailed, "503", retry, fin),
	}
	bad["code"].ErrorCode = "c\x00de"
	bad["target"].Target = "hook\xfe"
	items := []*store.JobFinishParams{bad["nul"], completion(run["good"], `{"ok":true}`, fin)}
	for _, k := range []string{"utf8", "json", "code", "target"} {
		items = append(items, bad[k])
	}
	errs := finishAll(t, s, items...)
	wantOK(t, "the valid finish", errs[1])
	wantJSON(t, "the valid finish's result", wantState(t, s, run["good"].ID, idemtype.StateCompleted).Result, `{"ok":true}`)
	for i, f := range items {
		if i == 1 {
			continue
		}
		wantErr(t, "finish of job "+itoa(f.ID), errs[i], idemtype.ErrInvalid)
		wantState(t, s, f.ID, idemtype.StateRunning)
	}
	// The lease is intact: a finish with text a store can hold goes through.
	ok := failure(run["nul"], idemtype.StateRetryable, idemtype.OutcomeFailed, "bad byte", retry, at(3*time.Second))
	finish1(t, s, ok)
	if j := wantState(t, s, run["nul"].ID, idemtype.StateRetryable); j.LastError != "bad byte" {
		t.Fatalf("last error %q after a valid finish", j.LastError)
	}
}
