package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/idem-dev/idem/store"
	"github.com/jackc/pgx/v5"
)

// qHeldBack returns the scopes of ($1 queue, $2 tenant; an empty tenant is
// every tenant) that hold a job a claim at $3 of kinds $4 (NULL = any) could
// take: claimable, due, of those kinds. Each is one probe of
// jobs_claim_tenant_idx, as the rotation's tenant probes are (a scope of
// every tenant reads the queue's part of the index until it meets a job
// that is due). A claim runs it only when a limit it found spent kept it
// from a scope (store.ClaimBudget.SpentScopes), to tell whether that
// limit held work back.
const qHeldBack = `SELECT s.queue, s.tenant FROM unnest($1::text[], $2::text[]) AS s(queue, tenant)
WHERE s.tenant <> '' AND EXISTS (SELECT 1 FROM {schema}.jobs j WHERE j.queue = s.queue AND j.tenant = s.tenant
    AND j.state = 'available' AND j.run_at <= $3
    AND ($4::text[] IS NULL OR j.kind = ANY($4::text[])))
UNION ALL
SELECT s.queue, s.tenant FROM unnest($1::text[], $2::text[]) AS s(queue, tenant)
WHERE s.tenant = '' AND EXISTS (SELECT 1 FROM {schema}.jobs j WHERE j.queue = s.queue
    AND j.state = 'available' AND j.run_at <= $3
    AND ($4::text[] IS NULL OR j.kind = ANY($4::text[])))`

// heldBackScopes returns those of scopes (tenant "" = every tenant) that
// hold a job the claim p at now could take (qHeldBack), in one statement
// on q; none without scopes. qHeldBack reads available jobs only: the
// claim must have promoted the due jobs of its queues first (see
// heldHits).
func (s *Store) heldBackScopes(ctx context.Context, q querier, p *store.JobClaimParams, now time.Time, scopes []store.FlowScope) ([]store.FlowScope, error) {
	if len(scopes) == 0 {
		return nil, nil
	}
	return collectHeldBack(q.Query(ctx, s.sql(qHeldBack), heldBackArgs(p, now, scopes)...))
}

// promoteHeldBackScopes is heldBackScopes for a claim that ran no claim
// statement: in one round trip on the pool (an implicit transaction), it
// first makes the due jobs of the claim's queues available
// (qClaimPromote), as the claim statement would have.
func (s *Store) promoteHeldBackScopes(ctx context.Context, p *store.JobClaimParams, now time.Time, scopes []store.FlowScope) ([]store.FlowScope, error) {
	if len(scopes) == 0 {
		return nil, nil
	}
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	b := &pgx.Batch{}
	s.queuePromote(b, p.Queues, now)
	b.Queue(s.sql(qHeldBack), heldBackArgs(p, now, scopes)...)
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	if err := execPromoteFirst(ctx, br, 1, 0); err != nil {
		return nil, fmt.Errorf("promote due jobs: %w", err)
	}
	out, err := collectHeldBack(br.Query())
	if err != nil {
		return nil, err
	}
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("held back: %w", err)
	}
	promotedCommitted(ctx) // the batch's implicit transaction
	return out, nil
}

// heldBackArgs are qHeldBack's arguments for the claim p at now of scopes.
func heldBackArgs(p *store.JobClaimParams, now time.Time, scopes []store.FlowScope) []any {
	queues, tenants := make([]string, len(scopes)), make([]string, len(scopes))
	for i, sc := range scopes {
		queues[i], tenants[i] = sc.Queue, sc.Tenant
	}
	var kinds []string
	if p.Kinds != nil {
		kinds = p.Kinds
	}
	return []any{queues, tenants, now, kinds}
}

// collectHeldBack reads qHeldBack's scopes.
func collectHeldBack(rows pgx.Rows, err error) ([]store.FlowScope, error) {
	if err != nil {
		return nil, fmt.Errorf("held back: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.FlowScope, error) {
		var sc store.FlowScope
		err := r.Scan(&sc.Queue, &sc.Tenant)
		return sc, err
	})
	if err != nil {
		return nil, fmt.Errorf("held back: %w", err)
	}
	return out, nil
}

// heldBack tells budget b which of the scopes its spent limits kept the
// claim p from hold work (store.ClaimBudget.SpentScopes, HeldBack): one
// statement on q, none when no limit was found spent.
func (s *Store) heldBack(ctx context.Context, q querier, p *store.JobClaimParams, b *store.ClaimBudget, now time.Time) error {
	waiting, err := s.heldBackScopes(ctx, q, p, now, b.SpentScopes(p.Tenant))
	if err != nil {
		return err
	}
	b.HeldBack(p.Tenant, waiting)
	return nil
}

// heldHits returns those of the spent rate budgets hits of a reserved
// claim p that held work back: whose scope in the claimed queue (a queue
// budget's: the claim's tenant, "" = every tenant) holds a job the claim
// could take (qHeldBack). The general path counts the same limits
// (store.ClaimBudget.HeldBack). No statement without hits.
//
// promote says the claim ran no claim statement, so it made none of its
// queue's due scheduled and retryable jobs available (qClaimPromote):
// then the promotion and qHeldBack go in one round trip (an implicit
// transaction). Without it (migration 0031 until the twenty-seventh
// session's fix), a limit that held back only such jobs was neither
// counted nor reported as throttling the claim.
func (s *Store) heldHits(ctx context.Context, p *store.JobClaimParams, now time.Time, hits []*rateBudget, promote bool) (_ []*rateBudget, err error) {
	if len(hits) == 0 {
		return nil, nil
	}
	scope := func(b *rateBudget) store.FlowScope {
		tenant := b.limit.Tenant
		if tenant == "" {
			tenant = p.Tenant
		}
		return store.FlowScope{Tenant: tenant, Queue: p.Queues[0]}
	}
	var scopes []store.FlowScope
	seen := map[store.FlowScope]bool{}
	for _, b := range hits {
		if sc := scope(b); !seen[sc] {
			seen[sc] = true
			scopes = append(scopes, sc)
		}
	}
	var waiting []store.FlowScope
	if promote {
		waiting, err = s.promoteHeldBackScopes(ctx, p, now, scopes)
	} else {
		var db querier
		if db, err = s.db(); err != nil {
			return nil, err
		}
		waiting, err = s.heldBackScopes(ctx, db, p, now, scopes)
	}
	if err != nil {
		return nil, err
	}
	has := make(map[store.FlowScope]bool, len(waiting))
	for _, w := range waiting {
		has[w] = true
	}
	var out []*rateBudget
	for _, b := range hits {
		if has[scope(b)] {
			out = append(out, b)
		}
	}
	return out, nil
}

// reportHits marks report throttled by the spent rate budgets hits that
// held work back, with the earliest end of their windows as its refill.
func reportHits(report *store.ClaimReport, hits []*rateBudget) {
	for _, b := range hits {
		report.Throttled = true
		if end := b.ws.Add(b.limit.Period); report.NextRefill.IsZero() || end.Before(report.NextRefill) {
			report.NextRefill = end
		}
	}
}
