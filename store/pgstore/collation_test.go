package pgstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/storetest"
)

// icuDatabase creates a database whose default collation is ICU's en-US
// (most production clusters sort text by a language, not by bytes) and
// returns its URL; it is dropped at the end of the test. It needs a server
// built with ICU (Debian's is).
func icuDatabase(t *testing.T) string {
	t.Helper()
	return newDatabase(t, icuOptions)
}

// icuOptions are the CREATE DATABASE options of icuDatabase.
const icuOptions = "TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8' ENCODING 'UTF8'"

// newDatabase creates a database with the options of CREATE DATABASE and
// then the settings (ALTER DATABASE … SET each), and returns its URL; it
// is dropped at the end of the test.
func newDatabase(t *testing.T, options string, settings ...string) string {
	t.Helper()
	url := dbtest.NewDatabase(t, options)
	if len(settings) == 0 {
		return url
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, dbtest.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	for _, set := range settings {
		if _, err := admin.Exec(ctx, "ALTER DATABASE "+cfg.Database+" SET "+set); err != nil {
			t.Fatal(err)
		}
	}
	return url
}

// TestKeyLockOrderUnderLanguageCollation: on a database that sorts text
// by language (en-US: "a1" < "B1", where bytes say "B1" < "a1"), batches
// of keyed inserts (records locked in byte order: qInsertFast's rank, the
// keyed COPY) race batches of key acquires by other owners
// (qRecordAcquireMany, whose ORDER BY must then sort by bytes too) over
// the same fresh keys of mixed case, from four stores on one schema.
// Overlap: each round's eight goroutines wait on one barrier. No batch may
// fail: locking one set of rows in two orders deadlocks (SQLSTATE 40P01).
func TestKeyLockOrderUnderLanguageCollation(t *testing.T) {
	t.Parallel()
	url := icuDatabase(t)
	const stores, rounds, keys = 4, 8, 200
	ss := make([]*Store, stores)
	for i := range ss {
		s, err := Open(context.Background(), withPoolSize(url, 3), &Config{Schema: "idem", SkipMigrate: i > 0})
		if err != nil {
			t.Fatalf("open store %d: %v", i, err)
		}
		t.Cleanup(func() { _ = s.Close() })
		ss[i] = s
	}
	for round := range rounds {
		names := make([]string, keys)
		for i := range names {
			c := "abcdefghij"[i%10 : i%10+1]
			if i%2 == 1 {
				c = strings.ToUpper(c)
			}
			names[i] = fmt.Sprintf("%s%03d-r%d", c, i, round)
		}
		start := make(chan struct{})
		errs := make([]error, 2*stores)
		var wg sync.WaitGroup
		for g := range 2 * stores {
			wg.Go(func() {
				s := ss[g%stores]
				<-start
				now := time.Now()
				if g < stores {
					ps := make([]*store.JobInsertParams, 0, keys)
					for _, i := range storetest.KeyOrder(g, round, keys) {
						p := benchJob()
						p.IdempotencyKey, p.Fingerprint, p.DedupWindow = names[i], "fp", time.Hour
						ps = append(ps, p)
					}
					res, err := s.JobInsertMany(t.Context(), &store.JobInsertManyParams{Jobs: ps, Now: now})
					for _, r := range res {
						if err == nil && r.Err != nil {
							err = r.Err
						}
					}
					errs[g] = err
					return
				}
				ps := make([]*store.RecordAcquireParams, 0, keys)
				for _, i := range storetest.KeyOrder(g, round, keys) {
					ps = append(ps, &store.RecordAcquireParams{Tenant: "default", Key: names[i],
						Owner: fmt.Sprintf("do:%d", g), LeaseUntil: now.Add(time.Minute), DedupUntil: now.Add(time.Hour),
						ExpiresAt: now.Add(time.Hour), Now: now})
				}
				_, errs[g] = s.RecordAcquireMany(t.Context(), ps)
			})
		}
		close(start)
		wg.Wait()
		for g, err := range errs {
			if err != nil {
				t.Fatalf("round %d, goroutine %d: %v", round, g, err)
			}
		}
	}
}
