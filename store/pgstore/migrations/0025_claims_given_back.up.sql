-- 0025: the tokens of claims given back (JobReleaseMany with ClaimToken).
-- A claim transaction that starts after its give-back (a claim cut off
-- before the server began it, see claim_token_lock.go) finds its token
-- here and claims nothing. Rows are written only by give-backs (claims
-- that failed) and deleted by later give-backs once a day old.
CREATE TABLE IF NOT EXISTS {schema}.claims_given_back (
    token text PRIMARY KEY,
    given_back_at timestamptz NOT NULL
);
-- The give-back's clean-up (given_back_at older than a day) reads this
-- index, not the table: give-backs come in bursts when the database is
-- struggling, which is when the table is largest.
CREATE INDEX IF NOT EXISTS claims_given_back_at_idx ON {schema}.claims_given_back (given_back_at);
