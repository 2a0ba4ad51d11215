package store

import (
	"sort"
	"time"

	"github.com/idem-dev/idem/idemtype"
)

// KindStatsSkew is how long before JobKindStats' Since the stores look for
// finished jobs: a job finishes after it is created, and the margin absorbs
// clock skew between the nodes that created and finished it.
const KindStatsSkew = time.Hour

// FinishedSince is the bound on finished_at JobKindStats reads finished
// jobs from: KindStatsSkew before p.Since.
func (p *JobKindStatsParams) FinishedSince() time.Time { return p.Since.Add(-KindStatsSkew) }

// KindStatsRow is one (kind, state) group of the JobKindStats aggregate, as
// both stores' queries return it.
type KindStatsRow struct {
	Kind, State string
	// Count counts the group's jobs, Started those claimed at least once or
	// retryable, Retried those past their first attempt or retryable.
	Count, Started, Retried int64
	// Runs counts the completed jobs that ran a handler; SumMS and MaxMS
	// are the sum and maximum of their durations in milliseconds.
	Runs         int64
	SumMS, MaxMS float64
}

// FoldKindStats turns the (kind, state) groups of the JobKindStats query
// into one JobKindStat per kind, sorted by kind.
func FoldKindStats(rows []KindStatsRow) []*JobKindStat {
	byKind := map[string]*JobKindStat{}
	sums := map[string]float64{}
	for _, r := range rows {
		k := byKind[r.Kind]
		if k == nil {
			k = &JobKindStat{Kind: r.Kind, States: map[idemtype.JobState]int64{}}
			byKind[r.Kind] = k
		}
		st := idemtype.JobState(r.State)
		k.States[st] += r.Count
		k.Count += r.Count
		k.Started += r.Started
		k.Retried += r.Retried
		if st == idemtype.StateRetryable || st == idemtype.StateDead {
			k.Failed += r.Count
		}
		if r.Runs > 0 {
			k.Runs += r.Runs
			sums[r.Kind] += r.SumMS
			k.MaxDurationMS = max(k.MaxDurationMS, r.MaxMS)
		}
	}
	out := make([]*JobKindStat, 0, len(byKind))
	for kind, k := range byKind {
		if k.Runs > 0 {
			k.AvgDurationMS = sums[kind] / float64(k.Runs)
		}
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Kind < out[j].Kind })
	return out
}
