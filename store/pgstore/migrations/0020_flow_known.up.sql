-- 0020: the tenants a store holds inherited rate budget for (pgstore
-- claim_reserved.go). A store (holder: a random name per Open) writes a
-- row when it starts holding budgets of a tenant under the default rates
-- of a queue's scope; a claim that spends reserved budget visits only
-- tenants with a row of its store, so that a tenant it has not seen yet
-- (whose inherited budget it does not hold) makes it decline. Close
-- deletes the store's rows; a store that crashed leaves rows nothing reads
-- again (another Open has another holder), removed by the next Open of
-- any store after a day.
CREATE TABLE {schema}.flow_known (
    holder  text        NOT NULL,
    queue   text        NOT NULL,
    tenant  text        NOT NULL,
    written timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (holder, queue, tenant)
);
