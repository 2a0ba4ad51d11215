import { test } from "node:test";
import assert from "node:assert/strict";
import { Idem, runWorker, PermanentError, type ClaimRequest, type ClaimResult, type RequestOptions } from "../src/index.js";
import { durationMs, errorText } from "../src/worker.js";
import { roomyRate, serverForFile } from "./server.js";

const env = serverForFile();

test("the worker loop runs, completes, fails and stops cleanly", async () => {
  const ids: string[] = [];
  for (let i = 0; i < 6; i++) ids.push((await env.idem.enqueue({ kind: "add", queue: "work", args: { a: i, b: 1 }, max_attempts: 2 })).job.id);
  const boom = (await env.idem.enqueue({ kind: "boom", queue: "work" })).job.id;
  const slow = (await env.idem.enqueue({ kind: "slow", queue: "work" })).job.id;
  const stop = new AbortController();
  const seen = new Set<string>();
  const errors: unknown[] = [];
  const loop = runWorker(env.idem, {
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
    const j = await env.idem.getJob(id);
    assert.equal(j.state, "completed");
    assert.deepEqual(j.result, { sum: i + 1 });
  }
  const b = await env.idem.getJob(boom);
  assert.equal(b.state, "dead");
  assert.equal(b.last_error, "cannot add");
  const s = await env.idem.getJob(slow);
  assert.equal(s.state, "completed");
  assert.equal(s.attempt, 1, "the slow job lost its lease and ran again");
});

test("an abort during an empty long poll stops at once", async () => {
  const stop = new AbortController();
  const loop = runWorker(env.idem, { queues: ["idle"], workerId: "idle", wait: "30s", signal: stop.signal, handler: async () => null });
  await new Promise((r) => setTimeout(r, 300));
  const t0 = Date.now();
  stop.abort();
  await loop;
  assert.ok(Date.now() - t0 < 1000, `stop took ${Date.now() - t0}ms`);
});

// JobContext.signal is aborted only when a heartbeat is refused (the lease
// is lost): a heartbeat that fails in transport (a network blip; the lease
// is still held) neither aborts the handler nor fails the job.
test("a transient heartbeat transport error does not abort the handler nor fail the job", async () => {
  let heartbeats = 0;
  const flaky: typeof fetch = async (input, init) => {
    const url = input instanceof Request ? input.url : String(input);
    if (url.endsWith("/heartbeat") && heartbeats++ === 0) throw new TypeError("fetch failed"); // one blip
    return fetch(input, init);
  };
  const idem = new Idem({ baseUrl: env.srv.url, apiKey: env.srv.adminKey, fetch: flaky });
  const id = (await idem.enqueue({ kind: "work", queue: "ts-hb", max_attempts: 1 })).job.id;
  const stop = new AbortController();
  const errors: unknown[] = [];
  let aborted = false;
  const loop = runWorker(idem, {
    queues: ["ts-hb"],
    workerId: "ts-worker",
    lease: "5s",
    wait: "1s",
    heartbeatMs: 200,
    signal: stop.signal,
    onError: (e) => errors.push(e),
    handler: async (_job, ctx) => {
      // 1 s of work that stops when told the lease is lost (as documented).
      for (let i = 0; i < 10; i++) {
        if (ctx.signal.aborted) {
          aborted = true;
          throw new Error("lease lost, giving up");
        }
        await new Promise((r) => setTimeout(r, 100));
      }
      return { done: true };
    },
  });
  const deadline = Date.now() + 10000;
  for (;;) {
    const j = await idem.getJob(id);
    if (j.state !== "available" && j.state !== "running") break;
    if (Date.now() > deadline) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  stop.abort();
  await loop;
  const j = await idem.getJob(id);
  assert.equal(j.state, "completed", `job ${j.state}: ${j.last_error ?? ""}`);
  assert.equal(aborted, false, "the handler was told its lease was lost after a mere transport error");
});

// A handler error the server would refuse as fail's "error" (more than
// 64 KiB, or a NUL byte) is cleaned up before fail: the job does not stay
// running until its lease expires and run again.
for (const [name, msg] of [
  ["a NUL byte", "bad input: \u0000"],
  ["more than 64 KiB", "x".repeat(70 * 1024)],
] as const) {
  test(`a PermanentError whose message has ${name} makes the job dead`, async () => {
    const idem = new Idem({ baseUrl: env.srv.url, apiKey: env.srv.adminKey });
    const queue = `ts-perm-${name.length}`;
    const id = (await idem.enqueue({ kind: "work", queue, max_attempts: 5 })).job.id;
    const stop = new AbortController();
    const errors: unknown[] = [];
    let runs = 0;
    const loop = runWorker(idem, {
      queues: [queue],
      workerId: "ts-worker",
      lease: "2s",
      wait: "1s",
      signal: stop.signal,
      onError: (e) => errors.push(e),
      handler: async () => {
        runs++;
        throw new PermanentError(msg);
      },
    });
    await new Promise((r) => setTimeout(r, 9000));
    stop.abort();
    await loop;
    const j = await idem.getJob(id);
    assert.equal(j.state, "dead", `job ${j.state} after ${runs} runs; loop errors: ${errors.map(String).join("; ").slice(0, 300)}`);
    assert.equal(runs, 1);
  });
}

test("error texts are made acceptable to fail", () => {
  assert.equal(errorText("bad \u0000x\ud800"), "bad x\ufffd");
  const s = errorText("\u20ac".repeat(40000)); // 3 bytes each: the cut falls inside one
  assert.equal(new TextEncoder().encode(s).length, 65535);
});

test("after a claim a spent rate limit held back, the worker long-polls until the budget returns", async () => {
  const r = await env.idem.api.PUT("/v1/limits/{scope}/{name}", { params: { path: { scope: "queue", name: "ts-worker-rate" } }, body: { rate: roomyRate(1).rate } });
  assert.equal(r.response.status, 200);
  await env.idem.enqueue({ kind: "k", queue: "ts-worker-rate" });
  await env.idem.enqueue({ kind: "k", queue: "ts-worker-rate" });
  const stop = new AbortController();
  const claims: { wait: string | undefined; reply?: ClaimResult }[] = [];
  // The real client, recording the wait of each claim and its answer.
  class Recording extends Idem {
    override async claimDetail(req: ClaimRequest, opts: RequestOptions = {}): Promise<ClaimResult> {
      const c: { wait: string | undefined; reply?: ClaimResult } = { wait: req.wait };
      claims.push(c);
      if (claims.length === 3) stop.abort();
      c.reply = await super.claimDetail(req, opts);
      return c.reply;
    }
  }
  const ran: string[] = [];
  await runWorker(new Recording({ baseUrl: env.srv.url, apiKey: env.srv.adminKey }), {
    queues: ["ts-worker-rate"],
    workerId: "ts-rate-worker",
    wait: "1s",
    signal: stop.signal,
    onError: () => {},
    handler: async (job) => void ran.push(job.id),
  });
  assert.equal(ran.length, 1);
  assert.equal(claims.length, 3);
  assert.equal(claims[0]?.wait, "1s");
  assert.equal(claims[1]?.wait, "1s", "the claim after one that got a job waits as configured");
  const held = claims[1]?.reply;
  assert.ok(held?.throttled && held.retryAfterMs > 0, "the second claim was throttled");
  const third = durationMs(claims[2]?.wait ?? "");
  // A window with five minutes left at least (one ending between the first
  // two claims would let the second job through): the wait is retry_after,
  // capped at 60s.
  assert.ok(third >= Math.min(held.retryAfterMs, 60_000) && third <= Math.min(held.retryAfterMs + 11, 60_000), `third claim waits ${claims[2]?.wait}, retry_after ${held.retry_after}`);
});

// A handler result that JSON cannot encode (a BigInt, a cycle) cannot be
// sent by complete: the job is failed without retry (as the PHP worker
// does), not left running until its lease expires and run again.
test("a result that is not JSON fails the job once instead of running it again", async () => {
  const idem = new Idem({ baseUrl: env.srv.url, apiKey: env.srv.adminKey });
  const queue = "ts-bigint-result";
  const id = (await idem.enqueue({ kind: "work", queue, max_attempts: 3 })).job.id;
  const stop = new AbortController();
  let runs = 0;
  const loop = runWorker(idem, {
    queues: [queue],
    workerId: "ts-worker",
    lease: "1s",
    wait: "1s",
    signal: stop.signal,
    onError: () => {},
    handler: async () => {
      runs++;
      return { n: 2n ** 64n };
    },
  });
  // Poll until the job leaves available/running (deadline 8s: with the bug
  // its lease expires every second and it runs again until attempts end).
  const deadline = Date.now() + 8000;
  for (;;) {
    const j = await idem.getJob(id);
    if ((j.state !== "available" && j.state !== "running") || Date.now() > deadline) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  stop.abort();
  await loop;
  const j = await idem.getJob(id);
  assert.equal(j.state, "dead", `job ${j.state} after ${runs} runs`);
  assert.equal(runs, 1);
  assert.match(j.last_error ?? "", /result is not JSON/);
});

test("after a heartbeat is refused (the job was cancelled) the worker sends no more heartbeats for it", async () => {
  const queue = "ts-lost-beats";
  const id = (await env.idem.enqueue({ kind: "k", queue })).job.id;
  let beats = 0;
  class Counting extends Idem {
    override async heartbeat(...args: Parameters<Idem["heartbeat"]>): ReturnType<Idem["heartbeat"]> {
      beats++;
      return super.heartbeat(...args);
    }
  }
  const stop = new AbortController();
  let atAbort = -1;
  await runWorker(new Counting({ baseUrl: env.srv.url, apiKey: env.srv.adminKey }), {
    queues: [queue],
    workerId: "ts-lost",
    lease: "5s",
    wait: "1s",
    heartbeatMs: 50,
    signal: stop.signal,
    onError: () => {},
    handler: async (_job, ctx) => {
      await env.idem.cancel(id);
      await new Promise<void>((r) => ctx.signal.addEventListener("abort", () => r(), { once: true }));
      atAbort = beats;
      // Ten more heartbeat intervals of work after the lease was lost.
      await new Promise((r) => setTimeout(r, 500));
      stop.abort();
      return null;
    },
  });
  assert.ok(atAbort >= 1, "the refused heartbeat aborted the handler");
  assert.equal(beats, atAbort, `heartbeats after the lease was lost: ${beats - atAbort}`);
});

// The API takes a duration in whole seconds ("30") as well as a Go
// duration ("30s"); durationMs read "30" as 0 ms, so a worker with lease
// "30" heartbeat every 100 ms (the floor) instead of every 10 s.
test("a lease in whole seconds is seconds: the worker heartbeats a third of it", async () => {
  assert.equal(durationMs("30"), 30_000);
  assert.equal(durationMs("0"), 0);
  assert.equal(durationMs("1m30s"), 90_000);
  const queue = "ts-lease-seconds";
  const id = (await env.idem.enqueue({ kind: "k", queue })).job.id;
  let beats = 0;
  class Counting extends Idem {
    override async heartbeat(...args: Parameters<Idem["heartbeat"]>): ReturnType<Idem["heartbeat"]> {
      beats++;
      return super.heartbeat(...args);
    }
  }
  const stop = new AbortController();
  await runWorker(new Counting({ baseUrl: env.srv.url, apiKey: env.srv.adminKey }), {
    queues: [queue],
    workerId: "ts-seconds",
    lease: "30",
    wait: "1",
    signal: stop.signal,
    onError: () => {},
    handler: async () => {
      // One second of work: well inside the first heartbeat (10 s).
      await new Promise((r) => setTimeout(r, 1000));
      stop.abort();
      return { done: true };
    },
  });
  assert.equal((await env.idem.getJob(id)).state, "completed");
  assert.equal(beats, 0, `${beats} heartbeats in 1 s of a 30 s lease`);
});
