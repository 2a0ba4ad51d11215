package pgstore

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/idem-dev/idem/store"
)

// TestFailedClaimAnnouncesNothing: a claim whose statement fails after its
// promotion was read rolls back, promotion included (its queue's due jobs
// are scheduled again), and announces nothing: announceLeftover counts the
// promotions of committed transactions only. A trigger of the test's
// schema refuses the claim's update to running. Then a claim of queue z
// leaves a promoted job (announced): q must not come before it (the store
// announces in order).
func TestFailedClaimAnnouncesNothing(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, 4)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	now := time.Now().UTC()
	var ps []*store.JobInsertParams
	for _, q := range []string{"q", "z", "z"} {
		ps = append(ps, &store.JobInsertParams{Tenant: "default", Queue: q, Kind: "k",
			Args: json.RawMessage(`{}`), MaxAttempts: 3, RunAt: now.Add(time.Minute)})
	}
	if _, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: ps, Now: now}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE FUNCTION {schema}.refuse_claim() RETURNS trigger LANGUAGE plpgsql AS
		$$BEGIN RAISE EXCEPTION 'test: claim refused'; END$$`,
		`CREATE TRIGGER refuse_claim BEFORE UPDATE ON {schema}.jobs FOR EACH ROW
		WHEN (NEW.state = 'running' AND NEW.queue = 'q') EXECUTE FUNCTION {schema}.refuse_claim()`,
	} {
		if _, err := s.pool.Exec(ctx, s.sql(q)); err != nil {
			t.Fatalf("create trigger: %v", err)
		}
	}
	ch, err := s.Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	at := now.Add(2 * time.Minute)
	claimOf := func(queue string) error {
		_, err := s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{queue}, WorkerID: "w", Limit: 1,
			LeaseUntil: at.Add(time.Minute), Now: at})
		return err
	}
	if err := claimOf("q"); err == nil {
		t.Fatal("the claim of q succeeded despite the trigger")
	}
	if err := claimOf("z"); err != nil {
		t.Fatalf("claim of z: %v", err)
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case v := <-ch:
			switch v {
			case "q":
				t.Fatal("a claim that failed and rolled back its promotion announced its queue")
			case "z":
				return
			}
		case <-deadline:
			t.Fatal("queue z not announced within 10s (a claim of 1 promoted 2 due jobs)")
		}
	}
}
