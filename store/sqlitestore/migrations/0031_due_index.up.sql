-- 0031: jobs_claim_tenant holds the available jobs only, and the scheduled
-- and retryable ones (waiting for their run_at) get an index of their own
-- in run_at order, jobs_due (queue, run_at, id). Before, the claim index
-- held every claimable state in (queue, tenant, priority DESC, run_at, id)
-- order, and a probe for a tenant's first due job read past every
-- not-yet-due job of that tenant and priority (run_at comes after priority
-- in the key): each claim's cost grew with the jobs scheduled for later or
-- retrying with a long backoff. Now a claim first promotes the due
-- scheduled and retryable jobs of its queues to available (a range of
-- jobs_due that ends at the first future run_at), then claims from the
-- available ones; the promoter reads jobs_due queue by queue the same way.
-- jobs_delayed (run_at) of the same jobs (0001), the promoter's, goes:
-- jobs_due serves it. Predicates spelt as chains of ORs (0027). Rebuilding
-- the indexes reads the jobs table once each.
DROP INDEX IF EXISTS jobs_delayed;
DROP INDEX IF EXISTS jobs_claim_tenant;
CREATE INDEX jobs_claim_tenant ON jobs (queue, tenant, priority DESC, run_at, id)
    WHERE state = 'available';
CREATE INDEX jobs_due ON jobs (queue, run_at, id)
    WHERE (state = 'scheduled' OR state = 'retryable');
