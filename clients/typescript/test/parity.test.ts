// Parity with the Go client (idemclient) against a real idem serve: claim
// answers that report throttling, failures with an error_code, replay,
// dead-letter delete and topics.
import { test } from "node:test";
import assert from "node:assert/strict";
import { IdemError, type Job } from "../src/index.js";
import { durationMs } from "../src/worker.js";
import { roomyRate, serverForFile } from "./server.js";

const env = serverForFile();

/** putLimit sets a queue's flow limit through the typed API. */
async function putLimit(queue: string, body: { rate?: string; concurrency?: number }): Promise<void> {
  const r = await env.idem.api.PUT("/v1/limits/{scope}/{name}", { params: { path: { scope: "queue", name: queue } }, body });
  assert.equal(r.response.status, 200);
}

test("claimDetail reports a spent rate limit: throttled, retry_after and next_available_at", async () => {
  const { rate, periodMs } = roomyRate(1);
  await putLimit("ts-rate", { rate });
  await env.idem.enqueue({ kind: "k", queue: "ts-rate" });
  await env.idem.enqueue({ kind: "k", queue: "ts-rate" });
  const first = await env.idem.claimDetail({ queues: ["ts-rate"], worker_id: "w", wait: "0s" });
  assert.equal(first.jobs.length, 1);
  assert.equal(first.throttled, false);
  assert.equal(first.retry_after, undefined);
  const held = await env.idem.claimDetail({ queues: ["ts-rate"], worker_id: "w", wait: "0s" });
  assert.deepEqual(held.jobs, []);
  assert.equal(held.throttled, true);
  assert.ok(held.retry_after && durationMs(held.retry_after) > 0 && durationMs(held.retry_after) <= periodMs, `retry_after ${held.retry_after}`);
  assert.ok(held.retryAfterMs > 0 && held.retryAfterMs === durationMs(held.retry_after));
  assert.ok(held.next_available_at && Date.parse(held.next_available_at) > Date.now());
  assert.deepEqual(await env.idem.claim({ queues: ["ts-rate"], worker_id: "w", wait: "0s" }), [], "claim still answers the jobs alone");
});

test("claimDetail reports a concurrency limit: throttled without retry_after", async () => {
  await putLimit("ts-conc", { concurrency: 1 });
  await env.idem.enqueue({ kind: "k", queue: "ts-conc" });
  await env.idem.enqueue({ kind: "k", queue: "ts-conc" });
  assert.equal((await env.idem.claim({ queues: ["ts-conc"], worker_id: "w", wait: "0s" })).length, 1);
  const held = await env.idem.claimDetail({ queues: ["ts-conc"], worker_id: "w", wait: "0s" });
  assert.equal(held.throttled, true);
  assert.equal(held.retry_after, undefined);
  assert.equal(held.retryAfterMs, 0);
});

test("fail sends error_code; dead jobs are listed by it, replayed and deleted", async () => {
  const { job } = await env.idem.enqueue({ kind: "charge", queue: "ts-codes", args: { n: 1 } });
  const [claimed] = await env.idem.claim({ queues: ["ts-codes"], worker_id: "w", wait: "0s" });
  assert.ok(claimed && claimed.id === job.id);
  const dead = await env.idem.fail(claimed, "card declined", { retry: false, errorCode: "E_DECLINED" });
  assert.equal(dead.state, "dead");
  assert.equal(dead.error_code, "E_DECLINED");
  const byCode: string[] = [];
  for await (const j of env.idem.listDLQ({ error_code: "E_DECLINED" })) byCode.push(j.id);
  assert.deepEqual(byCode, [job.id]);
  await assert.rejects(env.idem.fail(claimed, "x", { errorCode: "has space" }), (e: unknown) => e instanceof IdemError && e.status === 400);

  assert.equal(await env.idem.replay({ queue: "ts-codes", error_code: "E_DECLINED" }, { queue: "ts-codes-replayed" }), 1);
  const copies: Job[] = [];
  for await (const j of env.idem.listJobs({ queue: "ts-codes-replayed" })) copies.push(j);
  assert.equal(copies.length, 1);
  assert.equal((copies[0]?.metadata as Record<string, unknown> | undefined)?.["replay_of"], job.id);
  assert.deepEqual(copies[0]?.args, { n: 1 });
  assert.equal(await env.idem.replay({ queue: "ts-codes", kind: "nothing-matches" }), 0);

  await env.idem.dlqDelete(job.id);
  await assert.rejects(env.idem.getJob(job.id), (e: unknown) => e instanceof IdemError && e.status === 404);
  await assert.rejects(env.idem.dlqDelete(job.id), (e: unknown) => e instanceof IdemError && e.status === 404, "a first attempt's 404 is reported");
});

// A replay copies finished jobs only: the unfinished ones the filter
// selects are counted as skipped (the server's {enqueued, skipped}, the Go
// client's ReplayReport); replay still answers the copies alone.
test("replayReport copies the finished job and counts the unfinished one skipped", async () => {
  const { job: done } = await env.idem.enqueue({ kind: "k", queue: "ts-replay-mixed" });
  const [claimed] = await env.idem.claim({ queues: ["ts-replay-mixed"], worker_id: "w", wait: "0s" });
  assert.ok(claimed && claimed.id === done.id);
  await env.idem.complete(claimed, { ok: true });
  const { job: waiting } = await env.idem.enqueue({ kind: "k", queue: "ts-replay-mixed" });
  assert.deepEqual(await env.idem.replayReport({ queue: "ts-replay-mixed" }, { queue: "ts-replay-mixed-copies" }), { enqueued: 1, skipped: 1 });
  const copies: Job[] = [];
  for await (const j of env.idem.listJobs({ queue: "ts-replay-mixed-copies" })) copies.push(j);
  assert.deepEqual(copies.map((j) => (j.metadata as Record<string, unknown> | undefined)?.["replay_of"]), [done.id]);
  assert.equal((await env.idem.getJob(waiting.id)).state, "available", "the unfinished job runs as itself");
  assert.equal(await env.idem.replay({ queue: "ts-replay-mixed" }, { queue: "ts-replay-mixed-copies" }), 1, "replay answers the copies alone");
});

test("topics: subscriptions CRUD, publish once per key, the event log and replay", async () => {
  const topic = "ts-orders";
  const made = await env.idem.putSubscription(topic, "billing", { url: "http://127.0.0.1:9/b", kinds: ["order.paid"], max_attempts: 2 });
  assert.equal(made.created, true);
  assert.ok(made.subscription.secret?.startsWith("whsec_"), "a generated secret, shown once");
  assert.deepEqual(made.subscription.kinds, ["order.paid"]);
  assert.equal(made.subscription.max_attempts, 2);
  const again = await env.idem.putSubscription(topic, "billing", { url: "http://127.0.0.1:9/b2", kinds: ["order.paid"] });
  assert.equal(again.created, false);
  assert.equal(again.subscription.secret, undefined);
  assert.deepEqual((await env.idem.subscriptions(topic)).map((s) => [s.name, s.url]), [["billing", "http://127.0.0.1:9/b2"]]);

  const p1 = await env.idem.publish(topic, { key: "evt-1", type: "order.paid", partition_key: "o-1", payload: { n: 1 } });
  assert.equal(p1.existing, false);
  assert.equal(p1.deliveries, 1);
  const p2 = await env.idem.publish(topic, { key: "evt-1", type: "order.paid", partition_key: "o-1", payload: { n: 1 } });
  assert.equal(p2.existing, true);
  assert.equal(p2.event_id, p1.event_id);
  const other = await env.idem.publish(topic, { type: "order.created", payload: { n: 2 } });
  assert.equal(other.deliveries, 0, "kinds filter the event types");
  assert.notEqual(other.event_id, p1.event_id);

  const events = [];
  for await (const e of env.idem.listEvents(topic, { limit: 1 })) events.push(e);
  assert.deepEqual(events.map((e) => e.id), [p1.event_id, other.event_id], "oldest first, page by page");
  const paid = [];
  for await (const e of env.idem.listEvents(topic, { type: ["order.paid"] })) paid.push(e);
  assert.deepEqual(paid.map((e) => [e.key, e.payload]), [["evt-1", { n: 1 }]]);

  assert.deepEqual(await env.idem.replayEvents(topic, { partition_key: "o-1" }), { events: 1, deliveries: 1 });
  assert.deepEqual(await env.idem.replayEvents(topic), { events: 2, deliveries: 1 });

  await env.idem.deleteSubscription(topic, "billing");
  assert.deepEqual(await env.idem.subscriptions(topic), []);
  await assert.rejects(env.idem.deleteSubscription(topic, "billing"), (e: unknown) => e instanceof IdemError && e.status === 404);
});

test("getSubscription answers one subscription, never its secret; an unknown one is a 404", async () => {
  const topic = "ts-get-sub";
  const made = await env.idem.putSubscription(topic, "billing", { url: "http://127.0.0.1:9/b", kinds: ["order.paid"], max_attempts: 3 });
  assert.ok(made.subscription.secret, "the PUT that created it shows the secret");
  await env.idem.putSubscription(topic, "audit", { url: "http://127.0.0.1:9/a" });
  const got = await env.idem.getSubscription(topic, "billing");
  assert.equal(got.topic, topic);
  assert.equal(got.name, "billing");
  assert.equal(got.url, "http://127.0.0.1:9/b");
  assert.deepEqual(got.kinds, ["order.paid"]);
  assert.equal(got.max_attempts, 3);
  assert.equal(got.secret_count, 1);
  assert.equal(got.secret, undefined, "never its secret");
  assert.equal(got.created_at, made.subscription.created_at);
  const notFound = (e: unknown) => e instanceof IdemError && e.status === 404 && e.type === "not-found";
  await assert.rejects(env.idem.getSubscription(topic, "nobody"), notFound);
  await assert.rejects(env.idem.getSubscription("ts-get-sub-other", "billing"), notFound, "the name is looked up in its topic");
  await env.idem.deleteSubscription(topic, "billing");
  await assert.rejects(env.idem.getSubscription(topic, "billing"), notFound, "a deleted subscription");
});

// The routes the Go client offers as BatchCancel, DLQResolve, QueuePause
// and QueueResume, with the same meaning.
test("cancelBatch, dlqResolve, pauseQueue and resumeQueue", async () => {
  const made = await env.idem.createBatch({ key: "ts-cancel-batch", jobs: [{ kind: "k", queue: "ts-batch-cancel", args: { n: 1 } }, { kind: "k", queue: "ts-batch-cancel", args: { n: 2 } }] });
  const cancelled = await env.idem.cancelBatch(made.batch.id);
  assert.equal(cancelled.id, made.batch.id);
  assert.equal(cancelled.finished, true);
  assert.deepEqual(cancelled.jobs.map((j) => j.state), ["cancelled", "cancelled"]);

  const { job } = await env.idem.enqueue({ kind: "k", queue: "ts-resolve" });
  const [claimed] = await env.idem.claim({ queues: ["ts-resolve"], worker_id: "w", wait: "0s" });
  assert.ok(claimed);
  await env.idem.fail(claimed, "boom", { retry: false });
  const resolved = await env.idem.dlqResolve(job.id, { note: "refunded by hand" });
  assert.equal(resolved.state, "dead");
  const unresolved: string[] = [];
  for await (const j of env.idem.listDLQ({ queue: "ts-resolve", resolved: "false" })) unresolved.push(j.id);
  assert.deepEqual(unresolved, []);

  assert.deepEqual(await env.idem.pauseQueue("ts-paused"), { queue: "ts-paused", paused: true });
  await env.idem.enqueue({ kind: "k", queue: "ts-paused" });
  assert.deepEqual(await env.idem.claim({ queues: ["ts-paused"], worker_id: "w", wait: "0s" }), [], "a paused queue hands out nothing");
  assert.deepEqual(await env.idem.resumeQueue("ts-paused"), { queue: "ts-paused", paused: false });
  assert.equal((await env.idem.claim({ queues: ["ts-paused"], worker_id: "w", wait: "0s" })).length, 1);
});

// The schedule routes the Go client offers (PutSchedule, GetSchedule,
// ListSchedules, DeleteSchedule, TriggerSchedule), with the same meaning.
test("schedules: put, get, list, trigger once per key, delete", async () => {
  const s = await env.idem.putSchedule("ts-nightly", { cron: "0 3 * * *", timezone: "Europe/Berlin", kind: "report", queue: "ts-sched", args: { full: true } });
  assert.equal(s.name, "ts-nightly");
  assert.ok(s.next_fire_at, "a next firing");
  assert.equal((await env.idem.getSchedule("ts-nightly")).kind, "report");
  assert.deepEqual((await env.idem.listSchedules()).map((x) => x.name), ["ts-nightly"]);
  const first = await env.idem.triggerSchedule("ts-nightly", { key: "manual-1" });
  assert.equal(first.existing, false);
  assert.deepEqual(first.job.args, { full: true });
  const again = await env.idem.triggerSchedule("ts-nightly", { key: "manual-1" });
  assert.equal(again.existing, true);
  assert.equal(again.job.id, first.job.id);
  await env.idem.deleteSchedule("ts-nightly");
  await assert.rejects(env.idem.getSchedule("ts-nightly"), (e: unknown) => e instanceof IdemError && e.status === 404);
  await assert.rejects(env.idem.deleteSchedule("ts-nightly"), (e: unknown) => e instanceof IdemError && e.status === 404);
  assert.equal((await env.idem.getJob(first.job.id)).id, first.job.id, "the jobs it made are kept");
});
