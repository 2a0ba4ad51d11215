package idem_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// TestDoGivesTheKeyBackWhenItsResultIsNotStored: when fn succeeded but the
// store failed to keep its result (the database refused the write), Do
// returns the error and gives the key back, as for fn's own failure:
// nothing is cached, so the next Do of the key runs fn at once. It used to
// keep the key held until its lease ended (Config.LeaseDuration, 30 s by
// default), every Do of the key meanwhile failing with ErrKeyInProgress.
func TestDoGivesTheKeyBackWhenItsResultIsNotStored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "idem.db")
	st, err := sqlitestore.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	client, err := idem.NewClient(st, &idem.Config{Logger: quietLogger(), LeaseDuration: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	// The database refuses to complete a record, as one lost mid-write
	// fails the statement, until the trigger is dropped.
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TRIGGER boom BEFORE UPDATE OF status ON idem_keys
WHEN NEW.status = 'completed' BEGIN SELECT RAISE(ABORT, 'boom: the database failed'); END`); err != nil {
		t.Fatal(err)
	}
	runs := 0
	fn := func(context.Context) (any, error) { runs++; return runs, nil }
	if _, err := client.Do(ctx, "k", fn, nil); err == nil {
		t.Fatal("Do stored its result although the database refused it")
	} else if !errors.Is(err, idem.ErrResultNotStored) {
		t.Fatalf("Do: %v, want ErrResultNotStored", err)
	}
	if _, err := db.Exec(`DROP TRIGGER boom`); err != nil {
		t.Fatal(err)
	}
	r, err := client.Do(ctx, "k", fn, nil)
	if errors.Is(err, idem.ErrKeyInProgress) {
		t.Fatal("the key stays held by the Do whose result was not stored: ErrKeyInProgress")
	}
	if err != nil {
		t.Fatal(err)
	}
	if r.WasCached || runs != 2 || string(r.Result) != "2" {
		t.Fatalf("second Do: cached %v, result %s after %d runs; want fn run again", r.WasCached, r.Result, runs)
	}
	// And the result it stored is served.
	if r, err := client.Do(ctx, "k", fn, nil); err != nil || !r.WasCached || string(r.Result) != "2" {
		t.Fatalf("third Do: %+v, %v; want the cached 2", r, err)
	}
}

// TestDoCancelsFnWhenItsLeaseLapsesWhileRenewalsFail: when the renewals of
// Do's lease fail (the database refuses them) until the lease has ended,
// fn's context is cancelled with ErrLeaseLost, as a job handler's is by
// the heartbeater: another process may take the lapsed key over and run
// fn beside it. It used to run on, its lease long over, until the store
// answered again. Do's error then wraps ErrLeaseLost, also when fn returns
// only ctx.Err() (it said "context canceled", the caller's context live).
func TestDoCancelsFnWhenItsLeaseLapsesWhileRenewalsFail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "idem.db")
	st, err := sqlitestore.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	client, err := idem.NewClient(st, &idem.Config{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	lease := 300 * time.Millisecond
	var cause error
	_, err = client.Do(ctx, "k", func(ctx context.Context) (any, error) {
		// From now on the database refuses to move a lease end.
		if _, err := db.Exec(`CREATE TRIGGER boom BEFORE UPDATE OF lease_until ON idem_keys
WHEN NEW.lease_until IS NOT NULL BEGIN SELECT RAISE(ABORT, 'boom: the database failed'); END`); err != nil {
			return nil, err
		}
		select {
		case <-ctx.Done():
			cause = context.Cause(ctx)
			return nil, ctx.Err() // as most functions do: context.Canceled
		case <-time.After(waitTimeout):
			return "ran on", nil
		}
	}, &idem.DoOpts{Lease: lease})
	if !errors.Is(cause, idem.ErrLeaseLost) {
		t.Fatalf("fn's context: cause %v, want ErrLeaseLost once the %v lease lapsed", cause, lease)
	}
	if !errors.Is(err, idem.ErrLeaseLost) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Do: %v, want ErrLeaseLost wrapping fn's context.Canceled", err)
	}
	// The key is not cached: the next Do runs fn.
	if _, err := db.Exec(`DROP TRIGGER boom`); err != nil {
		t.Fatal(err)
	}
	r, err := client.Do(ctx, "k", func(context.Context) (any, error) { return 1, nil }, &idem.DoOpts{Wait: waitTimeout})
	if err != nil || r.WasCached {
		t.Fatalf("next Do: %+v, %v; want fn run", r, err)
	}
}
