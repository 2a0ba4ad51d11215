-- 0022: the attempts of each delivery job of a subscription (API.md's
-- max_attempts of PUT /v1/topics/{topic}/subscriptions/{name}); 0 = the
-- client's default (Config.MaxAttempts).
ALTER TABLE {schema}.delivery_targets ADD COLUMN max_attempts integer NOT NULL DEFAULT 0;
