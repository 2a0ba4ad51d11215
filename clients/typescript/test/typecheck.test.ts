// Generates types from the served document's source (idemhttp/openapi.json)
// and compiles fixtures/strict-program.ts with tsc --strict: the document
// alone must type a worker without casts or non-null assertions.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { repoRoot } from "./server.js";

const pkg = resolve(repoRoot, "clients/typescript");
const bin = (name: string) => join(pkg, "node_modules/.bin", name);

function tsc(dir: string, file: string): { ok: boolean; out: string } {
  try {
    execFileSync(bin("tsc"), ["--strict", "--noEmit", "--skipLibCheck", "--noUncheckedIndexedAccess", "--target", "ES2022", "--module", "NodeNext", "--moduleResolution", "NodeNext", "--lib", "ES2022,DOM", "--types", "node", join(dir, file)], {
      cwd: pkg,
      encoding: "utf8",
      stdio: "pipe",
    });
    return { ok: true, out: "" };
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string };
    return { ok: false, out: `${e.stdout ?? ""}${e.stderr ?? ""}` };
  }
}

test("types generated from the document compile a strict worker program", () => {
  const dir = mkdtempSync(join(pkg, ".typecheck-"));
  try {
    execFileSync(bin("openapi-typescript"), [join(repoRoot, "idemhttp/openapi.json"), "-o", join(dir, "schema.ts")], { stdio: "pipe" });
    const src = readFileSync(join(pkg, "fixtures/strict-program.ts"), "utf8");
    assert.doesNotMatch(src, /\bas\s+[A-Za-z{[(]/, "the program uses a cast");
    assert.doesNotMatch(src, /[\w)\]]!\s*[.;,)[]/, "the program uses a non-null assertion");
    copyFileSync(join(pkg, "fixtures/strict-program.ts"), join(dir, "program.ts"));
    const good = tsc(dir, "program.ts");
    assert.ok(good.ok, good.out);
    // The check can fail: without the lease token a heartbeat does not compile.
    writeFileSync(join(dir, "broken.ts"), src.replace("body: { lease_token: job.lease_token, lease: \"1m\" }", "body: { lease: \"1m\" }"));
    const bad = tsc(dir, "broken.ts");
    assert.ok(!bad.ok, "a heartbeat without lease_token compiled");
    assert.match(bad.out, /lease_token/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
