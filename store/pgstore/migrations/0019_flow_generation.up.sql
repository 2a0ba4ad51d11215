-- 0019: reserved rate budget (pgstore claim_reserved.go).
--
-- def_ver names a limit's rate: a row inserted, or given another rate or
-- period (which starts its window again, as LimitPut and LimitDelete do),
-- gets a new one. Budget a store reserved of a window is still counted in
-- it while the row keeps the def_ver it had then.
ALTER TABLE {schema}.flow_controls ADD COLUMN def_ver bigint NOT NULL DEFAULT 0;
CREATE SEQUENCE {schema}.flow_def_seq;
UPDATE {schema}.flow_controls SET def_ver = nextval('{schema}.flow_def_seq');

CREATE OR REPLACE FUNCTION {schema}.flow_def_ver() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' OR NEW.rate <> OLD.rate OR NEW.period_us <> OLD.period_us THEN
        NEW.def_ver := nextval('{schema}.flow_def_seq');
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER flow_controls_def_ver
    BEFORE INSERT OR UPDATE OF rate, period_us ON {schema}.flow_controls
    FOR EACH ROW EXECUTE FUNCTION {schema}.flow_def_ver();

-- flow_generation counts changes to what flow_controls defines (a rate,
-- period, concurrency, weight or pause put, changed or removed), not to its
-- windows: a store caches a queue's limits with the generation it read, and
-- a claim that spends budget reserved under them checks in its own
-- snapshot that the generation is still the one it cached.
CREATE TABLE {schema}.flow_generation (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    gen bigint  NOT NULL
);
INSERT INTO {schema}.flow_generation (one, gen) VALUES (true, 1);

CREATE OR REPLACE FUNCTION {schema}.flow_generation_bump() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE {schema}.flow_generation SET gen = gen + 1;
    RETURN NULL;
END
$$;

CREATE TRIGGER flow_controls_defined
    AFTER INSERT OR DELETE OR UPDATE OF rate, period_us, concurrency, weight, paused ON {schema}.flow_controls
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.flow_generation_bump();
