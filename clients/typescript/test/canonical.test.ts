// Canonical JSON and keys against the vectors package key pins
// (shared/testdata/key-vectors.json beside the checkout, else
// key/testdata/key-vectors.json; $IDEM_KEY_VECTORS wins) and Go's answers on the edges
// (key/testdata/canonical-edges.json, checked by key's TestCanonicalEdges).
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { canonicalize, canonicalValue, CanonicalError, contentKey, entityCanonical, entityHash, keyHash, lockKey, scopedKey, type Grain } from "../src/index.js";
import { repoRoot } from "./server.js";

interface Vectors {
  canonical: { name: string; input: string; canonical: string; sha256: string }[];
  formats: {
    name: string;
    prefix?: string;
    tenant?: string | null;
    user?: string | null;
    action?: string;
    payload?: string;
    function?: string;
    time?: string;
    zone?: string;
    grain?: Grain;
    entities?: string | null;
    entities_canonical?: string;
    key: string;
  }[];
}
interface Edges {
  cases: { name: string; input?: string; input_hex?: string; nest?: number; canonical?: string; error?: boolean }[];
}

const sharedVectors = join(repoRoot, "../shared/testdata/key-vectors.json");
const vectorsFile = process.env.IDEM_KEY_VECTORS || (existsSync(sharedVectors) ? sharedVectors : join(repoRoot, "key/testdata/key-vectors.json"));
const vectors = JSON.parse(readFileSync(vectorsFile, "utf8")) as Vectors;
const edges = JSON.parse(readFileSync(join(repoRoot, "key/testdata/canonical-edges.json"), "utf8")) as Edges;

test("the vectors are present", () => {
  assert.ok(vectors.canonical.length >= 10);
  assert.ok(vectors.formats.filter((f) => "user" in f).length >= 4);
  assert.ok(vectors.formats.filter((f) => "function" in f).length >= 5, "lock key vectors");
  assert.equal(vectors.formats.filter((f) => !("user" in f) && !("prefix" in f) && !("function" in f)).length, 0, "every format vector is checked");
  assert.ok(edges.cases.length >= 30);
});

for (const v of vectors.canonical) {
  test(`canonical: ${v.name}`, () => {
    const c = canonicalize(v.input);
    assert.equal(c, v.canonical);
    assert.equal(createHash("sha256").update(c, "utf8").digest("hex"), v.sha256);
    assert.equal(keyHash(new TextEncoder().encode(v.input)), v.sha256);
    assert.equal(canonicalize(c), c, "a fixed point");
  });
}

for (const f of vectors.formats) {
  if (f.action !== undefined && f.payload !== undefined) {
    const { tenant = null, user = null, action, payload } = f;
    test(`scoped key: ${f.name}`, () => assert.equal(scopedKey(tenant, user, action, payload), f.key));
  } else if (f.function !== undefined) {
    const { function: fn, tenant, time, zone, grain, entities = null, entities_canonical } = f;
    test(`lock key: ${f.name}`, () => {
      assert.ok(tenant && time && grain);
      assert.equal(lockKey(fn, tenant, time, zone, grain, entities), f.key);
      assert.equal(lockKey(fn, tenant, new Date(time), zone, grain, entities), f.key, "a Date as the time");
      if (entities !== null) {
        assert.equal(entityCanonical(entities), entities_canonical);
        assert.equal(entityHash(entities), f.key.split(":").pop());
      }
    });
  } else if (f.prefix !== undefined && f.payload !== undefined) {
    const { prefix, payload } = f;
    test(`content key: ${f.name}`, () => assert.equal(contentKey(prefix, payload), f.key));
  }
}

for (const e of edges.cases) {
  test(`canonical edge: ${e.name}`, () => {
    let input: string | Uint8Array = e.input ?? "";
    let want = e.canonical;
    if (e.nest !== undefined) input = want = "[".repeat(e.nest) + "]".repeat(e.nest);
    if (e.input_hex !== undefined) input = Buffer.from(e.input_hex, "hex");
    if (e.error) {
      assert.throws(() => canonicalize(input), CanonicalError);
      return;
    }
    assert.equal(canonicalize(input), want);
  });
}

test("JavaScript values canonicalize as JSON.stringify sends them", () => {
  assert.equal(canonicalValue({ b: [1.0, -0, 1e21], a: { "\u0000": null, z: undefined } }), '{"a":{"\\u0000":null},"b":[1,0,1e+21]}');
  assert.throws(() => canonicalValue(undefined), CanonicalError);
  assert.throws(() => canonicalValue(["\ud800"]), CanonicalError); // a lone surrogate is no UTF-8
  assert.throws(() => canonicalize('["\ud800"]'), CanonicalError);
});

test("key parts are checked", () => {
  assert.throws(() => scopedKey("ten_ant", "u", "a", "{}"), RangeError);
  assert.throws(() => scopedKey("t", "u\n", "a", "{}"), RangeError);
  assert.throws(() => scopedKey("t", "u", "", "{}"), RangeError);
  assert.throws(() => contentKey("p\u0085", "{}"), RangeError);
  assert.equal(scopedKey("t", "u", "send_email", '{"a":1}'), `t_u_send_email_${createHash("sha256").update('{"a":1}').digest("hex").slice(0, 16)}`);
  assert.throws(() => scopedKey("t", "u", "a", '{"a":1,"a":2}'), CanonicalError);
});

test("lock key parts are checked; entities must be an object", () => {
  const t = "2026-02-06T14:05:09Z";
  assert.throws(() => lockKey("a:b", "t", t, "UTC", "day", null), RangeError);
  // A time string without an offset would be read in the host's zone.
  assert.throws(() => lockKey("f", "t", "2026-02-06T23:30:00", "UTC", "hour", null), RangeError);
  assert.throws(() => lockKey("f", "t", "2026-02-06", "UTC", "day", null), RangeError);
  assert.equal(lockKey("f", "t", "2026-02-06T23:30:00+01:00", "UTC", "hour", null), "f:t:2026-02-06T22");
  assert.throws(() => lockKey("f", "t:1", t, "UTC", "day", null), RangeError);
  assert.throws(() => lockKey("f", "", t, "UTC", "day", null), RangeError);
  assert.throws(() => lockKey("f", "t", "not a time", "UTC", "day", null), RangeError);
  assert.throws(() => lockKey("f", "t", t, "UTC", "week" as Grain, null), RangeError);
  assert.throws(() => lockKey("f", "t", t, "Nowhere/City", "day", null), RangeError);
  assert.throws(() => lockKey("f", "t", t, "UTC", "day", "[1]"), RangeError);
  assert.throws(() => lockKey("f", "t", t, "UTC", "day", '{"a":1,"a":2}'), CanonicalError);
  assert.equal(lockKey("f", "t", t, undefined, "day", "  null "), "f:t:2026-02-06", "JSON null and no zone (UTC)");
  // Only JSON's whitespace (space, tab, LF, CR) is trimmed, as Go's
  // key.JSONSpace and PHP: other spaces and a BOM are not JSON.
  assert.equal(lockKey("f", "t", t, "UTC", "day", " \t\r\n"), "f:t:2026-02-06", "JSON whitespace only");
  for (const s of ["\v", "\f", "\u00a0", "\u0085", "\u2028", "\u3000", "\ufeff", "\u00a0null"]) {
    assert.throws(() => lockKey("f", "t", t, "UTC", "day", s), CanonicalError, JSON.stringify(s));
    assert.throws(() => lockKey("f", "t", t, "UTC", "day", new TextEncoder().encode(s)), CanonicalError, JSON.stringify(s) + " as bytes");
  }
  // Names that JavaScript objects would reorder, nesting and escapes: the
  // pairs keep the canonical (UTF-16) order, as Go's EntityCanonical does.
  const input = String.raw`{"b":{"y":[1,{"q":"\\"}],"x":null},"10":"a","2":"b","":0,"\u00e9":1e21}`;
  assert.equal(entityCanonical(input), String.raw`[["",0],["10","a"],["2","b"],["b",{"x":null,"y":[1,{"q":"\\"}]}],["é",1e+21]]`);
  assert.equal(entityCanonical("{}"), "[]");
});
