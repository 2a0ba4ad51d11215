package pgstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
	"github.com/jackc/pgx/v5"
)

// claimPromoteMax is the most due jobs of one queue a claim promotes
// (qClaimPromote), earliest run_at first; what is left is promoted by the
// next claims and the leader's promoter.
const claimPromoteMax = 1000

// qClaimPromote makes the due scheduled and retryable jobs of queues $1
// at $2 available, up to $3 per queue in run_at order, locked SKIP LOCKED
// (a concurrent claim promotes the others). The claim statements read
// jobs_claim_tenant_idx, which holds available jobs only (migration 0031):
// every claim runs this first, in its transaction, so that a job is
// claimable from its run_at on whether or not the promoter runs. Each
// queue is one range of jobs_due_idx (queue, run_at, id) that ends at the
// first job not yet due: a claim never reads the jobs waiting for later,
// however many. A promoted job stays locked until the claim commits; the
// claim itself may take it (its own lock), others skip it. It returns the
// ids of the jobs it promoted in each queue (announceLeftover), no row
// when none. A promotion whose snapshot predates another claim's committed promotion also locks the
// rows that claim made available (PostgreSQL keeps the lock of a row a
// locking scan re-checked and dropped) until it commits: claims skip them
// meanwhile, and nothing announces them when this claim took its limit
// without them (its next claim, or others' polls, take them).
const qClaimPromote = `WITH cand AS (
    SELECT c.id FROM unnest($1::text[]) AS q(queue)
    CROSS JOIN LATERAL (
        SELECT j.id FROM {schema}.jobs j
        WHERE j.queue = q.queue AND j.state IN ('scheduled', 'retryable') AND j.run_at <= $2
        ORDER BY j.run_at, j.id
        LIMIT $3
        FOR UPDATE OF j SKIP LOCKED
    ) c
), upd AS (
    UPDATE {schema}.jobs j SET state = 'available' FROM cand WHERE j.id = cand.id RETURNING j.queue, j.id
)
SELECT queue, array_agg(id) FROM upd GROUP BY queue`

// claimNotifyTimeout bounds the notification a claim sends when it
// left available jobs it promoted (announceLeftover).
const claimNotifyTimeout = 5 * time.Second

// promoteTally holds the ids of the jobs the promotions (qClaimPromote)
// of one JobClaim made available, by queue, over all of its round trips
// and paths, and whether they committed (announceLeftover).
type promoteTally struct {
	mu      sync.Mutex
	ids     map[string][]int64 // committed
	pending map[string][]int64 // read, in a transaction not yet committed
}

// begin starts the promotion of a new transaction: what is pending
// belongs to one that did not commit (each transaction of a claim promotes
// once, and a claim's transactions run one after the other).
func (t *promoteTally) begin() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending = nil
}

// add records ids promoted in queue, pending until commit.
func (t *promoteTally) add(queue string, ids []int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pending == nil {
		t.pending = map[string][]int64{}
	}
	t.pending[queue] = append(t.pending[queue], ids...)
}

// commit records that the transaction of the pending promotion committed.
func (t *promoteTally) commit() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for q, ids := range t.pending {
		if t.ids == nil {
			t.ids = map[string][]int64{}
		}
		t.ids[q] = append(t.ids[q], ids...)
	}
	t.pending = nil
}

// leftover returns the queues where the claim's committed promotions made
// available jobs it did not take (jobs; store.PromotedLeft), and how many
// jobs were promoted in all.
func (t *promoteTally) leftover(jobs []*idemtype.JobRow) ([]string, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	all := 0
	for _, ids := range t.ids {
		all += len(ids)
	}
	return store.PromotedLeft(t.ids, jobs), all
}

type promoteTallyKey struct{}

// promotedCommitted tells ctx's tally (none outside JobClaim) that the
// transaction of the claim's last promotion committed: every claim path
// calls it once its COMMIT succeeded. A promotion whose transaction failed
// or rolled back made nothing available, and is not announced.
func promotedCommitted(ctx context.Context) {
	if t, _ := ctx.Value(promoteTallyKey{}).(*promoteTally); t != nil {
		t.commit()
	}
}

// withPromoteTally returns ctx carrying a new tally for the claim it runs.
func withPromoteTally(ctx context.Context) (context.Context, *promoteTally) {
	t := &promoteTally{}
	return context.WithValue(ctx, promoteTallyKey{}, t), t
}

// execPromoteFirst reads the first n results of a claim's batch with Exec;
// the one at promote is its qClaimPromote, whose ids by queue go to ctx's
// tally, pending until the path calls promotedCommitted (a claim outside
// JobClaim has none: nothing is counted).
func execPromoteFirst(ctx context.Context, br pgx.BatchResults, n, promote int) error {
	for i := range n {
		if i != promote {
			if _, err := br.Exec(); err != nil {
				return err
			}
			continue
		}
		t, _ := ctx.Value(promoteTallyKey{}).(*promoteTally)
		if t != nil {
			t.begin()
		}
		var queue string
		var ids []int64
		rows, err := br.Query()
		if err != nil {
			return err
		}
		_, err = pgx.ForEachRow(rows, []any{&queue, &ids}, func() error {
			if t != nil {
				t.add(queue, ids)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// announceLeftover notifies the queues where the committed promotions of
// a claim made jobs available (t, by queue) that it did not take (taken,
// none when it failed): those are available, and the claimers of other
// nodes, and of this one, would learn it at their next poll only (the
// promoter notifies what it promotes). What counts is the promoted ids
// left, not how many jobs of the queue it took: a claim may take older
// available jobs first. A claim that took every job it promoted sends
// nothing, so the common claim pays nothing: the promotion returns no row
// when it promoted nothing. It runs right after the
// claim's commit (the decision needs the claim's result; in its
// transaction it would cost every claim a statement), one statement on
// the pool. A failure is logged: the claim stands, and polling stays the
// fallback.
func (s *Store) announceLeftover(ctx context.Context, t *promoteTally, taken []*idemtype.JobRow) {
	queues, promoted := t.leftover(taken)
	if len(queues) == 0 || s.closed.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimNotifyTimeout)
	defer cancel()
	if err := s.notify(ctx, s.pool, queues); err != nil {
		s.logger.Warn("pgstore: announce jobs a claim promoted and left", "queues", queues, "promoted", promoted,
			"taken", len(taken), "err", err)
	}
}

// queuePromote queues qClaimPromote for the claim of queues at now on b:
// the statement after the claim transaction's setup, read with Exec.
func (s *Store) queuePromote(b *pgx.Batch, queues []string, now time.Time) {
	b.Queue(s.sql(qClaimPromote), queues, now, claimPromoteMax)
}

// promoteAndList is the first round trip of the claim p at now without
// limits (claimFlow): [BEGIN, generic plans, qClaimPromote, each queue's
// qClaimRotation when the claim is of every tenant, COMMIT]. It returns
// those rotations, listed after the promotion, chained for claimFair (nil
// when not listed; a queue after one that claimed jobs has a smaller
// limit and is listed again). Generic plans: while a queue has no available job
// PostgreSQL found the custom plans of these statements cheaper and
// planned them anew at every claim, reading ten times the buffers of the
// claim itself (the planner's probes of the jobs indexes).
func (s *Store) promoteAndList(ctx context.Context, db dbtx, p *store.JobClaimParams, now time.Time) (*rotation, error) {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue("SET LOCAL plan_cache_mode = force_generic_plan")
	s.queuePromote(b, p.Queues, now)
	var listed []*rotation
	if p.Tenant == "" {
		var kinds []string
		if p.Kinds != nil {
			kinds = p.Kinds
		}
		for _, queue := range p.Queues {
			r := &rotation{queue: queue, limit: p.Limit, excluded: s.excluded.get(queue)}
			b.Queue(s.sql(qClaimRotation), queue, now, s.cursors.Get(queue), kinds, append([]string{}, r.excluded...), p.Limit)
			listed = append(listed, r)
		}
	}
	b.Queue("COMMIT")
	br := db.SendBatch(ctx, b)
	defer br.Close()
	if err := execPromoteFirst(ctx, br, 3, 2); err != nil {
		return nil, fmt.Errorf("promote due jobs: %w", err)
	}
	var pre *rotation
	for i, r := range listed {
		rows, err := br.Query()
		if err != nil {
			return nil, fmt.Errorf("list tenants: %w", err)
		}
		if r.tenants, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return nil, fmt.Errorf("list tenants: %w", err)
		}
		if i == 0 {
			pre = r
		} else {
			listed[i-1].next = r
		}
	}
	if _, err := br.Exec(); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	promotedCommitted(ctx)
	return pre, br.Close()
}
