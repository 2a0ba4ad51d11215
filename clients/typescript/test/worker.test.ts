import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Idem, runWorker, PermanentError } from "../src/index.js";
import { startServer, type TestServer } from "./server.js";

let srv: TestServer;
let idem: Idem;

before(async () => {
  srv = await startServer();
  idem = new Idem({ baseUrl: srv.url, apiKey: srv.adminKey });
});
after(async () => {
  await srv.stop();
});

test("the worker loop runs, completes, fails and stops cleanly", async () => {
  const ids: string[] = [];
  for (let i = 0; i < 6; i++) ids.push((await idem.enqueue({ kind: "add", queue: "work", args: { a: i, b: 1 }, max_attempts: 2 })).job.id);
  const boom = (await idem.enqueue({ kind: "boom", queue: "work" })).job.id;
  const slow = (await idem.enqueue({ kind: "slow", queue: "work" })).job.id;
  const stop = new AbortController();
  const seen = new Set<string>();
  const errors: unknown[] = [];
  const loop = runWorker(idem, {
    queues: ["work"],
    workerId: "ts-worker",
    concurrency: 3,
    lease: "2s",
    wait: "20s",
    heartbeatMs: 200,
    signal: stop.signal,
    onError: (e) => errors.push(e),
    handler: async (job) => {
      seen.add(job.id);
      if (job.kind === "boom") throw new PermanentError("cannot add");
      if (job.kind === "slow") {
        await new Promise((r) => setTimeout(r, 3000)); // longer than the lease: heartbeats keep it
        return { slow: true };
      }
      const args = job.args as { a: number; b: number };
      return { sum: args.a + args.b };
    },
  });
  const deadline = Date.now() + 15000;
  while (seen.size < 8 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  assert.equal(seen.size, 8);
  // Stop while the slow job runs and the loop long-polls: it must finish the job, then return promptly.
  const t0 = Date.now();
  stop.abort();
  await loop;
  assert.ok(Date.now() - t0 < 5000, `stop took ${Date.now() - t0}ms`);
  assert.deepEqual(errors, []);
  for (const [i, id] of ids.entries()) {
    const j = await idem.getJob(id);
    assert.equal(j.state, "completed");
    assert.deepEqual(j.result, { sum: i + 1 });
  }
  const b = await idem.getJob(boom);
  assert.equal(b.state, "dead");
  assert.equal(b.last_error, "cannot add");
  const s = await idem.getJob(slow);
  assert.equal(s.state, "completed");
  assert.equal(s.attempt, 1, "the slow job lost its lease and ran again");
});

test("an abort during an empty long poll stops at once", async () => {
  const stop = new AbortController();
  const loop = runWorker(idem, { queues: ["idle"], workerId: "idle", wait: "30s", signal: stop.signal, handler: async () => null });
  await new Promise((r) => setTimeout(r, 300));
  const t0 = Date.now();
  stop.abort();
  await loop;
  assert.ok(Date.now() - t0 < 1000, `stop took ${Date.now() - t0}ms`);
});
