-- 0018: PostgreSQL drops jobs_claim_idx (claims read jobs_claim_tenant_idx).
-- SQLite dropped its jobs_claim in 0013: nothing to do; the number is kept
-- so both stores count migrations alike.
SELECT 1;
