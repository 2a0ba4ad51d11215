// Canonical JSON and keys against the vectors package key pins
// (key/testdata/key-vectors.json) and Go's answers on the edges
// (key/testdata/canonical-edges.json, checked by key's TestCanonicalEdges).
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { canonicalize, canonicalValue, CanonicalError, contentKey, keyHash, scopedKey } from "../src/index.js";
import { repoRoot } from "./server.js";

interface Vectors {
  canonical: { name: string; input: string; canonical: string; sha256: string }[];
  formats: { name: string; prefix?: string; tenant?: string | null; user?: string | null; action?: string; payload?: string; key: string }[];
}
interface Edges {
  cases: { name: string; input?: string; input_hex?: string; nest?: number; canonical?: string; error?: boolean }[];
}

const vectors = JSON.parse(readFileSync(join(repoRoot, "key/testdata/key-vectors.json"), "utf8")) as Vectors;
const edges = JSON.parse(readFileSync(join(repoRoot, "key/testdata/canonical-edges.json"), "utf8")) as Edges;

test("the vectors are present", () => {
  assert.ok(vectors.canonical.length >= 10);
  assert.ok(vectors.formats.filter((f) => "user" in f).length >= 4);
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
