package sqlitestore

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// The insert paths of a batch of plain jobs (no key, no dependencies), each
// forced on the same batches (BENCHMARKS.md, "Insert strategies"): the
// multi-row INSERT of up to plainBatch rows that insertJobs uses ("rows",
// JobInsertMany itself) against one single-row INSERT per job ("perrow",
// insertPlainRows with one row, in the same one writer transaction); and
// keyed batches, which insertJobs inserts one by one (insertOne).

// insertPerRow inserts ps one row per statement in one write transaction,
// as insertJobs would without its multi-row INSERT.
func insertPerRow(b *testing.B, s *Store, ps []*store.JobInsertParams) {
	now := truncUS(time.Now())
	err := s.write(b.Context(), len(ps), func(t *wtx) error {
		for _, jp := range ps {
			id, err := t.takeID()
			if err != nil {
				return err
			}
			if err := insertPlainRows(t, []*idemtype.JobRow{newRow(id, jp, now, idemtype.StateAvailable, "")}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkInsertStrategy: plain batches of 1, 10, 100 and 1,000 jobs by
// the multi-row INSERT and one row per statement; keyed batches of 1,000
// (one by one, the only keyed path) for scale.
func BenchmarkInsertStrategy(b *testing.B) {
	plain := func(n int) []*store.JobInsertParams {
		ps := make([]*store.JobInsertParams, n)
		for i := range ps {
			ps[i] = job("bench")
			ps[i].RunAt = time.Time{}
		}
		return ps
	}
	for _, n := range []int{1, 10, 100, 1000} {
		b.Run(fmt.Sprintf("plain/n=%d/path=rows", n), func(b *testing.B) {
			s := openTest(b, benchConfig())
			ps := plain(n)
			for b.Loop() {
				res, err := s.JobInsertMany(b.Context(), &store.JobInsertManyParams{Jobs: ps})
				if err != nil || len(res) != n || res[n-1].Job == nil {
					b.Fatalf("insert: %d results, %v", len(res), err)
				}
			}
			reportJobs(b, s, b.N*n)
		})
		b.Run(fmt.Sprintf("plain/n=%d/path=perrow", n), func(b *testing.B) {
			s := openTest(b, benchConfig())
			ps := plain(n)
			for b.Loop() {
				insertPerRow(b, s, ps)
			}
			reportJobs(b, s, b.N*n)
		})
	}
	b.Run("keyed/n=1000/path=one-by-one", func(b *testing.B) {
		s := openTest(b, benchConfig())
		seq := 0
		for b.Loop() {
			b.StopTimer()
			ps := make([]*store.JobInsertParams, 1000)
			for i := range ps {
				seq++
				ps[i] = keyedJob("bench", "k"+strconv.Itoa(seq), "fp")
			}
			b.StartTimer()
			res, err := s.JobInsertMany(b.Context(), &store.JobInsertManyParams{Jobs: ps})
			if err != nil || len(res) != 1000 || res[999].Job == nil || res[999].Existing {
				b.Fatalf("insert: %d results, %v", len(res), err)
			}
		}
		reportJobs(b, s, b.N*1000)
	})
}
