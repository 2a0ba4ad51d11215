-- Earlier versions keep middleware and Do records under the caller's key
-- (the middleware's with its "http:" prefix). Moving them back could meet
-- a job key written since, so they are dropped instead: a request or Do
-- call repeated after the downgrade runs once more.
DELETE FROM {schema}.records WHERE left(key, 1) = chr(31);
