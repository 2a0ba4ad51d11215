-- idem:no-transaction
-- 0031: jobs_claim_tenant_idx holds the available jobs only, and the
-- scheduled and retryable ones (waiting for their run_at) get an index of
-- their own in run_at order, jobs_due_idx (queue, run_at, id).
--
-- Before, the claim index held every claimable state in (queue, tenant,
-- priority DESC, run_at, id) order, and a probe for a tenant's first due
-- job read past every not-yet-due job of that tenant and priority: run_at
-- comes after priority in the key, so the scan cannot stop at the first
-- future run_at. A queue with 100,000 jobs scheduled for tomorrow (or
-- retrying with a long backoff) made each empty claim read 100,000 index
-- entries (16 ms instead of 0.3 ms) and cut throughput of due work in the
-- same queue threefold, growing with the backlog. Now a claim first
-- promotes the due scheduled and retryable jobs of its queues to available
-- (a range of jobs_due_idx that ends at the first future run_at), then
-- claims from the available ones; the leader's promoter reads jobs_due_idx
-- queue by queue the same way.
--
-- No transaction (migrate.go, noTxMarker): the indexes are built with
-- CREATE INDEX CONCURRENTLY (claims, reads and writes of jobs go on), the
-- new claim index beside the old one, which it replaces. Each statement may
-- run again after a crash midway: each build first drops what an
-- interrupted one left (an INVALID index).
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_due_idx;
CREATE INDEX CONCURRENTLY jobs_due_idx ON {schema}.jobs (queue, run_at, id)
    WHERE state IN ('scheduled', 'retryable');
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_claim_tenant_idx_new;
CREATE INDEX CONCURRENTLY jobs_claim_tenant_idx_new ON {schema}.jobs (queue, tenant, priority DESC, run_at, id)
    WHERE state = 'available';
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_claim_tenant_idx;
ALTER INDEX {schema}.jobs_claim_tenant_idx_new RENAME TO jobs_claim_tenant_idx;
