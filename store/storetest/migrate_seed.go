package storetest

import (
	"testing"
	"time"

	"github.com/idem-dev/idem/store"
)

// SeedEveryTable writes a row into most of a store's tables, as a store in
// use holds them, before a migration test takes its schema down and up
// again: keyed jobs (one completed with its result, one running, one of a
// FIFO partition waiting), a record completed by Do, a schedule, a
// delivery target and a limit.
func SeedEveryTable(t *testing.T, s store.Store) {
	t.Helper()
	ctx := t.Context()
	js := insertNew(t, s, at(0), keyed("k1", "K1", "fp1"), keyed("k2", "K2", "fp2"),
		partitioned("p1", "default", "A"), partitioned("p2", "default", "A"))
	completeJob(t, s, js[0], at(time.Second), `{"ok":true}`)
	claimJob(t, s, js[1], at(2*time.Second))
	acquire(t, s, acq("do-key", "o1", at(0)))
	if err := complete(t, s, "do-key", "o1", `"done"`, at(time.Second)); err != nil {
		t.Fatalf("RecordComplete: %v", err)
	}
	if _, err := s.ScheduleUpsert(ctx, &store.ScheduleUpsertParams{Tenant: "default", Name: "nightly",
		Spec: []byte(`{"cron":"0 3 * * *","queue":"default","kind":"nightly"}`), Now: at(0)}); err != nil {
		t.Fatalf("ScheduleUpsert: %v", err)
	}
	if _, err := s.TargetPut(ctx, &store.DeliveryTarget{Tenant: "default", Name: "hook", Queue: "default", URL: "http://127.0.0.1:1/hook",
		Secrets: []string{"whsec_one"}, UpdatedAt: at(0)}); err != nil {
		t.Fatalf("TargetPut: %v", err)
	}
	if _, err := s.LimitPut(ctx, &store.LimitPutParams{Limit: store.Limit{FlowScope: store.FlowScope{Tenant: "default", Queue: "default"},
		Rate: 10, Period: time.Minute, Concurrency: 2}, Now: at(0)}); err != nil {
		t.Fatalf("LimitPut: %v", err)
	}
}
