-- 0018: jobs_claim_idx (queue, priority DESC, run_at, id) goes. Since fair
-- claims (0010) every claim reads a queue tenant by tenant through
-- jobs_claim_tenant_idx (queue, tenant, priority DESC, run_at, id); nothing
-- needs the queue-wide order any more. It was worse than unused: with stale
-- statistics (a burst of jobs before the next autoanalyze) the planner took
-- it for the tenant probes and sorted every claimable job of the queue for
-- each probed tenant (a claim of 10 from 100 tenants and 30,000 jobs: 132 ms
-- instead of about 1 ms), and every enqueued job wrote one more entry.
DROP INDEX IF EXISTS {schema}.jobs_claim_idx;
