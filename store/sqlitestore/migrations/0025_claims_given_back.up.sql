-- 0025: PostgreSQL adds claims_given_back, the tokens of failed claims
-- given back, which a claim transaction starting after its give-back
-- checks. SQLite claims through one writer, so a claim never commits after
-- its give-back: nothing to do; the number is kept so both stores count
-- migrations alike.
SELECT 1;
