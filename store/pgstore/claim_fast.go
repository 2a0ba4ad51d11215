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

// The fast claim: one round trip for the common case of a queue that no
// flow-control row touches (no limit, weight or pause of the queue, of a
// tenant or of a tenant in the queue).
//
// qClaimOne checks that case in the statement's own snapshot (guard) and,
// when it holds, lists the tenants with claimable work in rotation from
// the cursor $3 (the skip scan of qClaimRotation, wrapping around; or only
// tenant $8 when set) and claims each visited tenant's first-round share
// ceil($5 / tenants), in visit order and never more than $5 in all, which
// is exactly the first round of claimQueue without flow rows. It returns
// the guard, the visited tenants and the claimed jobs (one row of NULL job
// columns when none was claimed). When the guard fails it visits and
// claims nothing, and the caller takes the general path.
//
// Solo: when the previous claim of the queue visited one tenant $9 only
// (on any path; $9 is then the cursor $3, see rotationStart), the
// statement first checks that no other tenant has claimable work (two
// probes that start beside $9's index range and never enter it) and then
// visits $9 without probing it: the same visit list as the rotation's (or
// $9 with nothing to claim where the rotation lists no one: the cursor
// stays at $9 either way), but without walking $9's head of just-claimed,
// not yet vacuumed index entries twice more (the rotation's probes did,
// and that was most of a one-tenant claim's time).
//
// The tenant probes order by the whole key of jobs_claim_tenant_idx
// (tenant, priority DESC, run_at, id), not by tenant alone: a tenant-leading
// list index gives tenant order too, and the planner sometimes walked one
// over every finished job (the probe read the whole history); it cannot
// give this order without a sort. (A row comparison (queue, tenant) >
// ($1, x) forces the index as well but makes the scan start at the
// queue's first entry.) The UPDATE finds the locked rows by primary key
// (= ANY(ARRAY(...))): joined to the CTE it was planned as a hash join
// over a sequential scan of jobs.
//
// It is as exact as the general path: a flow-control row committed before
// this statement's snapshot is seen by the guard (the general path reads
// the rows in an earlier statement, so it can only see less); claims of
// limited queues lock their rows and count running jobs as before.
var qClaimOne = `WITH RECURSIVE guard AS (
    SELECT NOT EXISTS (SELECT 1 FROM {schema}.flow_controls f
        WHERE (f.queue = '' OR f.queue = $1) AND (f.rate > 0 OR f.concurrency > 0 OR f.weight > 0 OR f.paused)) AS ok
), ` + claimOneBody("", "", "", "$10") + `, meta AS (
    SELECT (SELECT ok FROM guard) AS ok, (SELECT coalesce(array_agg(tenant ORDER BY ord), '{}') FROM ten) AS visited
)
SELECT m.ok, m.visited, u.* FROM meta m LEFT JOIN upd u ON true`

// claimOneBody is what follows the guard CTE (a boolean ok) in qClaimOne
// and qClaimOneLimited: the solo check, the rotation (solo, fwd, fwdl,
// wrap, ten), each visited tenant's first-round want (want), the locked
// candidates (cand) and the claim (upd). spent, when not empty, is a SQL
// text[] expression of tenants the rotation skips; fits, when not empty, a
// boolean SQL expression that must hold for anything to be claimed;
// weights, when not empty, SQL text[] and int[] expressions (separated by
// a comma) of tenants' weights (1 for tenants they do not name), which
// divide the first round as store.ClaimBudget.Shares does.
func claimOneBody(spent, fits, weights, token string) string {
	skip := func(col string) string {
		if spent == "" {
			return ""
		}
		return " AND " + col + " <> ALL(" + spent + ")"
	}
	gate := ""
	if fits != "" {
		gate = " AND " + fits
	}
	return `solo AS (
    SELECT $9::text <> '' AND $8::text = ''
        AND (SELECT j.tenant FROM {schema}.jobs j WHERE j.tenant > $9::text AND j.queue = $1 AND j.state = 'available' AND j.run_at <= $2
            AND ($4::text[] IS NULL OR j.kind = ANY($4::text[]))
            ORDER BY j.tenant, j.priority DESC, j.run_at, j.id LIMIT 1) IS NULL
        AND (SELECT j.tenant FROM {schema}.jobs j WHERE j.tenant < $9::text AND j.queue = $1 AND j.state = 'available' AND j.run_at <= $2
            AND ($4::text[] IS NULL OR j.kind = ANY($4::text[]))
            ORDER BY j.tenant DESC, j.priority, j.run_at DESC, j.id DESC LIMIT 1) IS NULL AS yes
), fwd(tenant) AS (
    SELECT ` + tenantProbe("$3") + `
    WHERE $8::text = '' AND (SELECT ok FROM guard) AND NOT (SELECT yes FROM solo)
    UNION ALL
    SELECT ` + tenantProbe("fwd.tenant") + `
    FROM fwd WHERE fwd.tenant IS NOT NULL
), fwdl AS (
    SELECT tenant FROM fwd WHERE tenant IS NOT NULL` + skip("tenant") + ` LIMIT $5
), wrap(tenant) AS (
    SELECT ` + tenantProbe("''") + `
    WHERE $8::text = '' AND $3 <> '' AND (SELECT count(*) FROM fwdl) < $5 AND (SELECT ok FROM guard)
        AND NOT (SELECT yes FROM solo)
    UNION ALL
    SELECT ` + tenantProbe("wrap.tenant") + `
    FROM wrap WHERE wrap.tenant IS NOT NULL AND wrap.tenant < $3
), ten AS (
    SELECT tenant, row_number() OVER (ORDER BY part, tenant) AS ord FROM (
        SELECT 0 AS part, tenant FROM fwdl
        UNION ALL
        (SELECT 1, tenant FROM wrap WHERE tenant IS NOT NULL AND tenant <= $3` + skip("tenant") + `
            LIMIT greatest(0, $5 - (SELECT count(*) FROM fwdl)))
        UNION ALL
        SELECT 0, $8 WHERE $8::text <> ''` + skip("$8") + `
        UNION ALL
        SELECT 0, $9 WHERE (SELECT yes FROM solo)` + skip("$9") + `
    ) x
    WHERE (SELECT ok FROM guard)
), want AS (
    ` + wantOf(weights) + `
), cand AS (
    SELECT c.id FROM want x
    CROSS JOIN LATERAL ` + tenantClaimProbe("$2", "$4") + ` AS c
    WHERE x.n > 0` + gate + `
), ` + claimCTEs("$2", "$6", "$7", token)
}

// wantOf is the body of claimOneBody's want CTE: each visited tenant's
// first-round want, in visit order its share (ceil(limit × weight ÷ sum of
// weights)) while the claim has room, as store.ClaimRounds takes them.
func wantOf(weights string) string {
	if weights == "" {
		return `SELECT tenant, ord, least(s.share, greatest(0, $5 - s.share * (ord - 1)))::int AS n
    FROM ten, (SELECT (($5 + count(*) - 1) / greatest(count(*), 1))::int AS share FROM ten) s`
	}
	// sum over bigint is numeric: the casts keep the division integral.
	return `SELECT tenant, ord, greatest(0, least(sh, $5 - ((sum(sh) OVER (ORDER BY ord))::bigint - sh)))::int AS n FROM (
        SELECT tenant, ord, ($5 * w + (sum(w) OVER ())::bigint - 1) / (sum(w) OVER ())::bigint AS sh FROM (
            SELECT ten.tenant, ten.ord, coalesce(wt.w, 1)::bigint AS w
            FROM ten LEFT JOIN unnest(` + weights + `) AS wt(tenant, w) ON wt.tenant = ten.tenant
        ) a
    ) b`
}

// flowHints remembers, per queue, that the last claim found flow-control
// rows, so that the next claim goes straight to the general path instead
// of trying the fast one first. A hint is only a guess: the fast path
// checks the rows itself, and the general path clears the hint when it
// finds none.
type flowHints struct {
	mu sync.Mutex
	m  map[string]bool
}

func (h *flowHints) get(queue string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.m[queue]
}

func (h *flowHints) set(queue string, v bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[string]bool{}
	}
	if v {
		h.m[queue] = true
	} else {
		delete(h.m, queue)
	}
}

// prefixRow scans the leading meta columns of a qClaimOne or
// qClaimOneLimited row into meta before the job columns.
type prefixRow struct {
	rows pgx.Rows
	meta []any
}

func (r prefixRow) Scan(dest ...any) error {
	return r.rows.Scan(append(append([]any{}, r.meta...), dest...)...)
}

// claimOne is the fast claim of one queue (qClaimOne). ok is false when
// flow-control rows apply: then nothing was claimed. Later rounds among
// the tenants that filled their share (when others ran short) use
// claimRounds, as the general path does.
func (s *Store) claimOne(ctx context.Context, q dbtx, p *store.JobClaimParams, now time.Time) (out []*idemtype.JobRow, ok bool, err error) {
	queue := p.Queues[0]
	var kinds []string
	if p.Kinds != nil {
		kinds = p.Kinds
	}
	cursor, solo := s.rotationStart(queue)
	// One round trip: the statement runs in its own transaction with JIT
	// off. Once the table has statistics its estimated cost passes
	// jit_above_cost, and compiling it took ~0.5 s per claim (4-5x less
	// throughput) for a statement that runs in a millisecond; a local
	// setting keeps it to this transaction, whoever owns the pool. The
	// same first statement takes the claim token's lock
	// (claim_token_lock.go).
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(s.sql(qClaimOneSetup), s.claimLockClass(), p.LeaseToken)
	s.queuePromote(b, p.Queues, now)
	b.Queue(s.sql(qClaimOne), queue, now, cursor, kinds, p.Limit, p.LeaseUntil, p.WorkerID, p.Tenant, solo, p.LeaseToken)
	b.Queue("COMMIT")
	br := q.SendBatch(ctx, b)
	defer br.Close()
	if err := execPromoteFirst(ctx, br, 3, 2); err != nil {
		return nil, false, err
	}
	var visited []string
	out, err = readClaimRows(br, &ok, &visited)
	if err != nil {
		return nil, false, err
	}
	if _, err := br.Exec(); err != nil {
		return nil, false, fmt.Errorf("commit: %w", err)
	}
	promotedCommitted(ctx)
	if err := br.Close(); err != nil {
		return nil, false, err
	}
	if !ok {
		return nil, false, nil
	}
	full := s.afterFirstRound(p, now, out, visited, nil)
	more, _, err := s.claimRounds(ctx, q, p, store.NewClaimBudget(now, nil, nil), queue, now, p.Limit-len(out), full)
	if err != nil {
		return nil, false, err
	}
	return append(out, more...), true, nil
}

// readClaimRows reads the rows of qClaimOne or qClaimOneLimited: the meta
// columns into meta (the first is always the guard, the second the visited
// tenants), then the claimed jobs.
func readClaimRows(br pgx.BatchResults, meta ...any) ([]*idemtype.JobRow, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*idemtype.JobRow
	for rows.Next() {
		if rows.RawValues()[len(meta)] == nil { // no job claimed: only the meta row
			if err := rows.Scan(append(append([]any{}, meta...), make([]any, len(rows.FieldDescriptions())-len(meta))...)...); err != nil {
				return nil, err
			}
			continue
		}
		j, err := scanClaimed(prefixRow{rows: rows, meta: meta})
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// rotated records the tenants a claim of queue (all tenants) visited, on
// every path: the cursor moves to the last of them (a claim that visited
// none leaves it), and solo remembers the only one, if one only.
func (s *Store) rotated(queue string, visited []string) {
	if len(visited) > 0 {
		s.cursors.Set(queue, visited[len(visited)-1])
	}
	if len(visited) == 1 {
		s.solo.Set(queue, visited[0])
	} else {
		s.solo.Set(queue, "")
	}
}

// rotationStart returns the cursor of queue and the solo tenant the
// one-statement claims may visit without probing it ($9 of claimOneBody):
// solo only while it is still the cursor, so that visiting it when it has
// no claimable work left leaves the cursor where it is, as the rotation's
// empty list does (a cursor moved since, by another claim, is not moved
// back onto it).
func (s *Store) rotationStart(queue string) (cursor, solo string) {
	cursor = s.cursors.Get(queue)
	if solo = s.solo.Get(queue); solo != cursor {
		solo = ""
	}
	return cursor, solo
}

// afterFirstRound moves the queue's cursor after a one-statement claim
// that visited tenants and returns the tenants that got all of their
// first-round want (as the statement computed it) and those the claim's
// limit gave none, among which later rounds share what is left (as
// store.ClaimRoundsTurns).
// weights are the weighted scopes of the queue (as store.ClaimBudget.SetWeights takes them).
func (s *Store) afterFirstRound(p *store.JobClaimParams, now time.Time, out []*idemtype.JobRow, visited []string,
	weights []*store.Limit) []string {
	queue := p.Queues[0]
	b := store.NewClaimBudget(now, nil, nil)
	b.SetWeights(weights)
	shares := b.Shares(queue, visited, p.Limit)
	got := map[string]int{}
	for _, j := range out {
		got[j.Tenant]++
	}
	var full []string
	left := p.Limit
	turns := visited
	for i, tenant := range visited {
		want := min(shares[i], left)
		if want == 0 {
			// The claim's limit left it out: the cursor stays before
			// it (store.ClaimRoundsTurns).
			// It and the tenants after it share what is left, with
			// those that filled theirs.
			turns = visited[:i:i]
			full = append(full, visited[i:]...)
			break
		}
		left -= want
		if got[tenant] == want {
			full = append(full, tenant)
		}
	}
	if p.Tenant == "" {
		s.rotated(queue, turns)
	}
	return full
}
