-- idem:no-transaction
DROP INDEX CONCURRENTLY IF EXISTS {schema}.jobs_claim_idx;
CREATE INDEX CONCURRENTLY jobs_claim_idx ON {schema}.jobs (queue, priority DESC, run_at, id)
    WHERE state IN ('available', 'scheduled', 'retryable');
