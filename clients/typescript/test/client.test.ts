import { test } from "node:test";
import assert from "node:assert/strict";
import { Idem, IdemError, type Job } from "../src/index.js";
import { serverForFile } from "./server.js";

const env = serverForFile();

test("the document is served without an API key", async () => {
  const res = await fetch(`${env.srv.url}/v1/openapi.json`);
  assert.equal(res.status, 200);
  const doc = (await res.json()) as { openapi: string; paths: Record<string, unknown> };
  assert.equal(doc.openapi, "3.1.0");
  assert.ok(doc.paths["/v1/claim"]);
  const jobs = await fetch(`${env.srv.url}/v1/jobs`);
  assert.equal(jobs.status, 401);
});

test("enqueue with a key enqueues once", async () => {
  const first = await env.idem.enqueue({ kind: "send_email", queue: "mail-once", args: { to: "a@example.com" } }, { idempotencyKey: "welcome-1" });
  assert.equal(first.existing, false);
  assert.equal(first.job.state, "available");
  assert.equal(first.job.idempotency_key, "welcome-1");
  const again = await env.idem.enqueue({ kind: "send_email", queue: "mail-once", args: { to: "a@example.com" } }, { idempotencyKey: "welcome-1" });
  assert.equal(again.existing, true);
  assert.equal(again.job.id, first.job.id);
  const got = await env.idem.getJob(first.job.id);
  assert.deepEqual(got.args, { to: "a@example.com" });
});

test("a key reused with another request is a 422 problem", async () => {
  await env.idem.enqueue({ kind: "k", queue: "reuse" }, { idempotencyKey: "reuse-1" });
  await assert.rejects(env.idem.enqueue({ kind: "other", queue: "reuse" }, { idempotencyKey: "reuse-1" }), (err: unknown) => {
    assert.ok(err instanceof IdemError);
    assert.equal(err.status, 422);
    return true;
  });
});

test("problems become IdemError: max_attempts 0 is a 400", async () => {
  await assert.rejects(env.idem.enqueue({ kind: "k", max_attempts: 0 }), (err: unknown) => {
    assert.ok(err instanceof IdemError);
    assert.equal(err.status, 400);
    assert.equal(err.type, "invalid-request");
    assert.ok(err.problem?.errors?.["max_attempts"]);
    return true;
  });
});

test("a job's own retry policy is kept; a bad one is a 400 naming the field", async () => {
  const r = await env.idem.enqueue({ kind: "hook", queue: "mw-retry", retry: { max_attempts: 4, base: "60s", factor: 2 } });
  assert.equal(r.job.max_attempts, 4);
  assert.equal(r.job.retry?.base, "1m0s");
  await assert.rejects(env.idem.enqueue({ kind: "hook", queue: "mw-retry", retry: { factor: 0.5 } }), (err: unknown) => {
    assert.ok(err instanceof IdemError);
    assert.equal(err.status, 400);
    assert.ok(err.problem?.errors?.["retry.factor"]);
    return true;
  });
});

test("a batch's on_finish job waits for every job", async () => {
  const b = await env.idem.createBatch({
    key: "upload-ts-1",
    jobs: [{ kind: "upload", queue: "ts-up", args: { f: "a" } }],
    on_finish: { kind: "report", queue: "ts-reports" },
  });
  assert.equal(b.existing, false);
  assert.equal(b.batch.on_finish?.state, "pending");
  const child = b.batch.jobs[0];
  assert.ok(child);
  await env.idem.cancel(child.id);
  const got = await env.idem.getBatch(b.batch.id);
  assert.equal(got.finished, true);
  assert.equal(got.on_finish?.state, "available");
  assert.equal((got.on_finish?.metadata as Record<string, unknown> | undefined)?.["idem_batch_id"], Number(b.batch.id));
});

test("a batch answers a result per item", async () => {
  const results = await env.idem.enqueueBatch([{ kind: "a", queue: "batch" }, { kind: "b", queue: "batch", max_attempts: 0 }, { kind: "c", queue: "batch" }], {
    idempotencyKey: "batch-1",
  });
  assert.equal(results.length, 3);
  const ids: string[] = [];
  for (const r of results) if ("job" in r) ids.push(r.job.id);
  assert.equal(ids.length, 2);
  const bad = results[1];
  assert.ok(bad && "error" in bad && bad.error.status === 400);
  const again = await env.idem.enqueueBatch([{ kind: "a", queue: "batch" }, { kind: "c", queue: "batch" }], { idempotencyKey: "batch-1" });
  const first = again[0];
  assert.ok(first && "job" in first && first.existing && first.job.id === ids[0]);
});

test("lists page with an async iterator", async () => {
  const made: string[] = [];
  for (let i = 0; i < 7; i++) made.push((await env.idem.enqueue({ kind: "page", queue: "paging", args: { i } })).job.id);
  const seen: Job[] = [];
  for await (const j of env.idem.listJobs({ queue: "paging", limit: 3 })) seen.push(j);
  assert.deepEqual(
    seen.map((j) => j.id),
    [...made].reverse(),
  );
  let n = 0;
  for await (const _ of env.idem.listJobs({ queue: "paging", state: "completed" })) n++;
  assert.equal(n, 0);
});

test("claim, heartbeat, complete and fail; dead jobs requeue", async () => {
  const a = (await env.idem.enqueue({ kind: "w", queue: "pull" })).job;
  const b = (await env.idem.enqueue({ kind: "w", queue: "pull" })).job;
  const jobs = await env.idem.claim({ queues: ["pull"], worker_id: "w1", limit: 2, lease: "30s" });
  assert.deepEqual(jobs.map((j) => j.id).sort(), [a.id, b.id].sort());
  const ja = jobs.find((j) => j.id === a.id);
  const jb = jobs.find((j) => j.id === b.id);
  assert.ok(ja && jb);
  const until = await env.idem.heartbeat(ja, "2m");
  assert.ok(Date.parse(until) > Date.parse(ja.lease_expires_at));
  const done = await env.idem.complete(ja, { sent: true });
  assert.equal(done.state, "completed");
  assert.deepEqual(done.result, { sent: true });
  const dead = await env.idem.fail(jb, "boom", { retry: false });
  assert.equal(dead.state, "dead");
  assert.equal(dead.last_error, "boom");
  await assert.rejects(env.idem.complete(jb, null), (err: unknown) => err instanceof IdemError && err.status === 409);
  const inDLQ: string[] = [];
  for await (const j of env.idem.listDLQ({ queue: "pull" })) inDLQ.push(j.id);
  assert.deepEqual(inDLQ, [b.id]);
  assert.equal(await env.idem.requeue({ ids: [b.id] }), 1);
  assert.equal((await env.idem.getJob(b.id)).state, "available");
  const attempts = await env.idem.attempts(a.id);
  assert.equal(attempts.length, 1);
  assert.equal(attempts[0]?.outcome, "completed");
});

test("an empty long poll waits and returns no jobs", async () => {
  const t0 = Date.now();
  const jobs = await env.idem.claim({ queues: ["empty"], worker_id: "w1", wait: "500ms" });
  assert.equal(jobs.length, 0);
  assert.ok(Date.now() - t0 >= 400, "claim returned before wait");
});

test("stats are typed and complete", async () => {
  const s = await env.idem.stats();
  const q = s.queues["pull"];
  assert.ok(q);
  assert.equal(q.counts.completed, 1);
  assert.equal(typeof s.idempotency.hit_rate, "number");
});

// A transport failure is an IdemError with status 0 (an abort stays an AbortError).
test("a transport failure is an IdemError with status 0", async () => {
  const idem = new Idem({ baseUrl: "http://127.0.0.1:1", apiKey: "idem_x" });
  await assert.rejects(idem.getJob("1"), (e: unknown) => e instanceof IdemError && e.status === 0);
});

test("an aborted request stays an AbortError", async () => {
  await assert.rejects(env.idem.getJob("1", { signal: AbortSignal.abort() }), (e: unknown) => e instanceof Error && e.name === "AbortError");
});
