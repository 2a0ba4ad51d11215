package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

// onFakeClockClients runs fn, as a parallel subtest for each lease store
// kind, with a client without queues on a fresh store of that kind, its
// clock driven by clock.
func onFakeClockClients(t *testing.T, fn func(t *testing.T, c *idem.Client, clock *fakeClock)) {
	t.Helper()
	for _, kind := range leaseStoreKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			st, _ := openLeaseStore(t, kind)
			clock := &fakeClock{now: time.Date(2031, 3, 1, 12, 0, 0, 0, time.UTC)}
			c, err := idem.NewClient(st, &idem.Config{Logger: quietLogger(), Now: clock.Now})
			if err != nil {
				t.Fatalf("client: %v", err)
			}
			fn(t, c, clock)
		})
	}
}

// acquireLease acquires key with opts and fails unless it got the lease.
func acquireLease(t *testing.T, c *idem.Client, key string, opts *idem.ResultLeaseOpts) *idem.ResultLease {
	t.Helper()
	l, err := c.ResultLeaseAcquire(context.Background(), key, opts)
	if err != nil || l.Token == "" {
		t.Fatalf("acquire: %+v %v", l, err)
	}
	return l
}

// TestResultLeaseOutlivesTTL: a result TTL shorter than the work (cache for
// a minute what takes ten) must not end the lease of the running holder.
// The record of a held key once expired at acquire + TTL: at that instant a
// second caller took the key while the holder still held a live lease (the
// work ran twice), the holder's renewal was refused as a lost lease and its
// result was refused too.
func TestResultLeaseOutlivesTTL(t *testing.T) {
	t.Parallel()
	onFakeClockClients(t, func(t *testing.T, c *idem.Client, clock *fakeClock) {
		ctx := context.Background()
		opts := &idem.ResultLeaseOpts{Lease: 10 * time.Minute, TTL: time.Minute}
		first := acquireLease(t, c, "ttl:k", opts)
		clock.Add(time.Minute) // the TTL from the acquire: the lease lives on
		if second, err := c.ResultLeaseAcquire(ctx, "ttl:k", opts); !errors.Is(err, idem.ErrKeyInProgress) {
			t.Errorf("acquire while the first lease lives: %+v %v; want ErrKeyInProgress", second, err)
		}
		if _, err := c.ResultLeaseRenew(ctx, "", "ttl:k", first.Token, 10*time.Minute); err != nil {
			t.Errorf("renew of the live lease: %v", err)
		}
		clock.Add(5 * time.Minute)
		if _, err := c.ResultLeaseComplete(ctx, "", "ttl:k", first.Token, json.RawMessage(`7`), time.Minute, 0); err != nil {
			t.Fatalf("complete of the live lease: %v", err)
		}
		clock.Add(time.Minute - time.Microsecond) // the result lives TTL from its completion
		got, err := c.ResultLeaseAcquire(ctx, "ttl:k", opts)
		if err != nil || got.Cached == nil || string(got.Cached.Result) != "7" {
			t.Errorf("acquire within the result's TTL: %+v %v; want the cached 7", got, err)
		}
	})
}

// TestDoOutlivesTTL: Do whose fn runs past the result TTL keeps its key
// (another Do waits, fn runs once) and stores its result.
func TestDoOutlivesTTL(t *testing.T) {
	t.Parallel()
	onFakeClockClients(t, func(t *testing.T, c *idem.Client, clock *fakeClock) {
		ctx := context.Background()
		opts := &idem.DoOpts{TTL: time.Minute, Lease: time.Hour}
		runs := 0
		res, err := c.Do(ctx, "ttl:do", func(ctx context.Context) (any, error) {
			runs++
			clock.Add(2 * time.Minute) // fn outlives the TTL, not its lease
			_, err := c.Do(ctx, "ttl:do", func(context.Context) (any, error) { runs++; return 2, nil }, opts)
			if !errors.Is(err, idem.ErrKeyInProgress) {
				t.Errorf("second Do while the first runs: %v; want ErrKeyInProgress", err)
			}
			return 1, nil
		}, opts)
		if err != nil || string(res.Result) != "1" {
			t.Fatalf("Do: %+v %v; want 1", res, err)
		}
		if runs != 1 {
			t.Errorf("fn ran %d times, want 1", runs)
		}
	})
}

// TestResultLeaseKeepsTheAcquiresTTL: the result TTL given at acquire
// (ResultLeaseOpts.TTL, the acquire's result_ttl over HTTP, the Go
// client's LeaseAcquire ttl) is how long the result is kept when the
// complete names none, as the idemclient LeaseComplete cannot. The
// complete used Config.ResultTTL instead: a result asked to be kept an
// hour was kept a day (or a day's asked for was dropped after an hour).
func TestResultLeaseKeepsTheAcquiresTTL(t *testing.T) {
	t.Parallel()
	onFakeClockClients(t, func(t *testing.T, c *idem.Client, clock *fakeClock) {
		ctx := context.Background()
		for _, ttl := range []time.Duration{time.Hour, 72 * time.Hour} {
			key := "acq-ttl:" + ttl.String()
			l := acquireLease(t, c, key, &idem.ResultLeaseOpts{Lease: time.Minute, TTL: ttl})
			clock.Add(time.Second)
			if _, err := c.ResultLeaseComplete(ctx, "", key, l.Token, json.RawMessage(`1`), 0, 0); err != nil {
				t.Fatalf("complete: %v", err)
			}
			rec, err := c.DoRecordGet(ctx, "", key)
			if err != nil || rec.CompletedAt == nil || rec.ResultExpiresAt == nil {
				t.Fatalf("record: %+v %v", rec, err)
			}
			if got := rec.ResultExpiresAt.Sub(*rec.CompletedAt); got != ttl {
				t.Errorf("result kept %v after its completion, want the acquire's %v", got, ttl)
			}
		}
	})
}

// TestResultLeaseRenewKeepsTheAcquiresLease: a renewal without a lease
// (the Go client's LeaseRenew with 0, renew over HTTP without "lease")
// extends the lease by the duration it was acquired with. It renewed to
// Config.LeaseDuration, shortening a 10-minute lease to the default: a
// holder renewing every third of its 10 minutes lost the key to another
// caller in between, and the work ran twice.
func TestResultLeaseRenewKeepsTheAcquiresLease(t *testing.T) {
	t.Parallel()
	onFakeClockClients(t, func(t *testing.T, c *idem.Client, clock *fakeClock) {
		ctx := context.Background()
		const lease = 10 * time.Hour // longer than any default
		l := acquireLease(t, c, "renew:k", &idem.ResultLeaseOpts{Lease: lease})
		clock.Add(time.Hour)
		until, err := c.ResultLeaseRenew(ctx, "", "renew:k", l.Token, 0)
		if err != nil || !until.Equal(clock.Now().Add(lease)) {
			t.Fatalf("renew: until %v %v, want now + the acquire's %v = %v", until, err, lease, clock.Now().Add(lease))
		}
		clock.Add(3 * time.Hour) // past any default lease, within the acquire's
		if got, err := c.ResultLeaseAcquire(ctx, "renew:k", nil); !errors.Is(err, idem.ErrKeyInProgress) {
			t.Fatalf("acquire while the renewed lease lives: %+v %v; want ErrKeyInProgress", got, err)
		}
	})
}
