-- 0025: the tokens of claims given back (JobReleaseMany with ClaimToken).
-- A claim transaction that starts after its give-back (a claim cut off
-- before the server began it, see claim_token_lock.go) finds its token
-- here and claims nothing. Rows are written only by give-backs (claims
-- that failed) and deleted by later give-backs once a day old.
CREATE TABLE IF NOT EXISTS {schema}.claims_given_back (
    token text PRIMARY KEY,
    given_back_at timestamptz NOT NULL
);
