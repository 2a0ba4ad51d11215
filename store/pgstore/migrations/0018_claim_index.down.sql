CREATE INDEX IF NOT EXISTS jobs_claim_idx ON {schema}.jobs (queue, priority DESC, run_at, id)
    WHERE state IN ('available', 'scheduled', 'retryable');
