// The client's retries against a real idem serve behind a fault-injecting
// proxy: a lost reply is retried with the same Idempotency-Key (one job),
// a Retry-After is honoured up to maxBackoffMs, and a key that cannot
// travel as a header is refused before anything is sent.
import { test } from "node:test";
import assert from "node:assert/strict";
import { ConflictError, Idem, IdemError } from "../src/index.js";
import { serverForFile } from "./server.js";
import { startProxy, type Fault, type Seen } from "./proxy.js";

const env = serverForFile();

/** through runs fn with a client whose requests pass the proxy with the faults of fault. */
async function through<T>(fault: (s: Seen, n: number) => Fault, opts: Partial<ConstructorParameters<typeof Idem>[0]>, fn: (c: Idem, seen: Seen[]) => Promise<T>): Promise<T> {
  const proxy = await startProxy(env.srv.url, fault);
  try {
    return await fn(new Idem({ baseUrl: proxy.url, apiKey: env.srv.adminKey, ...opts }), proxy.seen);
  } finally {
    await proxy.close();
  }
}

test("an enqueue whose reply is lost is retried with the same key: one job", async () => {
  const r = await through((_, n) => (n === 0 ? "drop" : "pass"), { minBackoffMs: 10 }, (c) => c.enqueue({ kind: "k", queue: "lost-reply" }));
  assert.equal(r.existing, true, "the retry answered the job the first attempt made");
  const jobs = [];
  for await (const j of env.idem.listJobs({ queue: "lost-reply" })) jobs.push(j);
  assert.equal(jobs.length, 1);
  assert.equal(jobs[0]?.id, r.job.id);
  assert.ok(r.job.idempotency_key, "the call's random key is the job's");
});

test("a claim and a complete whose replies are lost are retried: the job is claimed and completed once", async () => {
  const id = (await env.idem.enqueue({ kind: "k", queue: "lost-claim" })).job.id;
  const keys = new Set<string | undefined>();
  // The first attempt of each claim and complete reaches the server; its reply is lost.
  const dropFirst = (s: Seen): Fault => {
    if (!s.path.endsWith("/claim") && !s.path.endsWith("/complete")) return "pass";
    if (keys.has(s.key)) return "pass";
    keys.add(s.key);
    return "drop";
  };
  await through(
    dropFirst,
    { minBackoffMs: 10 },
    async (c, seen) => {
      const jobs = await c.claim({ queues: ["lost-claim"], worker_id: "w", wait: "0s" });
      assert.deepEqual(jobs.map((j) => j.id), [id], "the retried claim replays the first claim's jobs");
      const job = jobs[0];
      assert.ok(job);
      assert.equal((await c.complete(job, { ok: 1 })).state, "completed");
      const claims = seen.filter((s) => s.path.endsWith("/claim"));
      assert.equal(claims.length, 2);
      assert.equal(claims[0]?.key, claims[1]?.key, "one key for both attempts");
    },
  );
  const attempts = await env.idem.attempts(id);
  assert.equal(attempts.length, 1);
});

// A reply whose body is cut (the connection ends after the headers) got no
// answer, as a dropped one: it is retried with the same key, as the Go
// and PHP clients retry it, and never surfaces as a bare TypeError.
test("an enqueue and a claim whose reply bodies are cut are retried with the same key", async () => {
  const cutFirst = (_: Seen, n: number): Fault => (n === 0 ? "cut" : "pass");
  const r = await through(cutFirst, { minBackoffMs: 10 }, (c) => c.enqueue({ kind: "k", queue: "cut-reply" }));
  assert.equal(r.existing, true, "the retry answered the job the first attempt made");
  const jobs = [];
  for await (const j of env.idem.listJobs({ queue: "cut-reply" })) jobs.push(j);
  assert.deepEqual(jobs.map((j) => j.id), [r.job.id]);
  const claimed = await through(cutFirst, { minBackoffMs: 10 }, async (c, seen) => {
    const got = await c.claim({ queues: ["cut-reply"], worker_id: "w", wait: "0s" });
    assert.equal(seen.length, 2);
    assert.equal(seen[0]?.key, seen[1]?.key, "one key for both attempts");
    return got;
  });
  assert.deepEqual(claimed.map((j) => j.id), [r.job.id], "the retried claim answered the first claim's job");
  await assert.rejects(
    through(() => "cut", { minBackoffMs: 10, maxRetries: 1 }, (c) => c.stats()),
    (e: unknown) => e instanceof IdemError && e.status === 0,
  );
});

test("a 503 with Retry-After waits that long, at most maxBackoffMs", async () => {
  const unavailable = (_: Seen, n: number): Fault => (n === 0 ? { status: 503, headers: { "Retry-After": "1" } } : "pass");
  let t0 = Date.now();
  const job = await through(unavailable, { minBackoffMs: 10 }, (c) => c.enqueue({ kind: "k", queue: "retry-after" }));
  assert.equal(job.existing, false);
  assert.ok(Date.now() - t0 >= 950, `retried after ${Date.now() - t0}ms, before the Retry-After`);
  t0 = Date.now();
  await through(unavailable, { minBackoffMs: 10, maxBackoffMs: 200 }, (c) => c.stats());
  assert.ok(Date.now() - t0 < 900, `retried after ${Date.now() - t0}ms: the cap is maxBackoffMs`);
});

test("maxRetries 0 does not retry; a 4xx is never retried", async () => {
  await through(
    () => ({ status: 503 }),
    { maxRetries: 0 },
    async (c, seen) => {
      await assert.rejects(c.stats(), (e: unknown) => e instanceof IdemError && e.status === 503);
      assert.equal(seen.length, 1);
    },
  );
  await through(
    () => "pass",
    { minBackoffMs: 10 },
    async (c, seen) => {
      await assert.rejects(c.enqueue({ kind: "k", max_attempts: 0 }), (e: unknown) => e instanceof IdemError && e.status === 400);
      assert.equal(seen.length, 1);
    },
  );
});

test("a 409 key-in-progress is retried until the first answer is stored", async () => {
  await through(
    (_, n) => (n === 0 ? { status: 409, headers: { "Retry-After": "0" }, body: { type: "/problems/idempotency-key-in-progress", title: "Idempotency key in progress", status: 409, detail: "x" } } : "pass"),
    { minBackoffMs: 10 },
    async (c, seen) => {
      assert.equal((await c.enqueue({ kind: "k", queue: "in-progress" })).existing, false);
      assert.equal(seen.length, 2);
    },
  );
});

// A 409 conflict (a concurrent change kept the operation from completing;
// nothing was done, and the server keeps no answer under the key) is
// retried with the same key, as the Go client retries it; when the retries
// run out it is thrown as a ConflictError (an IdemError of type conflict).
test("a 409 conflict is retried with the same key; a ConflictError when retries run out", async () => {
  const conflict: Fault = { status: 409, headers: { "Retry-After": "0" }, body: { type: "/problems/conflict", title: "Concurrent change", status: 409, detail: "schedule replaced" } };
  await env.idem.putSchedule("ts-conflict", { every: "1h", kind: "k", queue: "ts-conflict" });
  const r = await through(
    (s, n) => (n < 2 && s.method === "POST" ? conflict : "pass"),
    { minBackoffMs: 10 },
    async (c, seen) => {
      const r = await c.triggerSchedule("ts-conflict");
      assert.deepEqual(seen.map((s) => s.method), ["POST", "POST", "POST"]);
      assert.equal(new Set(seen.map((s) => s.key)).size, 1, "one key for every attempt");
      return r;
    },
  );
  assert.equal(r.existing, false, "the third attempt reached the server and fired the schedule");
  const jobs = [];
  for await (const j of env.idem.listJobs({ queue: "ts-conflict" })) jobs.push(j);
  assert.deepEqual(jobs.map((j) => j.id), [r.job.id]);
  await through(
    () => conflict,
    { minBackoffMs: 10, maxRetries: 2 },
    async (c, seen) => {
      await assert.rejects(
        c.triggerSchedule("ts-conflict"),
        (e: unknown) => e instanceof ConflictError && e instanceof IdemError && e.status === 409 && e.type === "conflict",
      );
      assert.equal(seen.length, 3, "the first attempt and maxRetries retries");
    },
  );
  await through(
    () => ({ ...conflict, body: { type: "/problems/wrong-state", title: "Wrong state", status: 409, detail: "x" } }),
    { minBackoffMs: 10 },
    async (c, seen) => {
      await assert.rejects(c.cancel("1"), (e: unknown) => e instanceof IdemError && !(e instanceof ConflictError) && e.type === "wrong-state");
      assert.equal(seen.length, 1, "another 409 is not retried");
    },
  );
});

test("an idempotency key that cannot travel as a header is refused before sending", async () => {
  await through(
    () => "pass",
    {},
    async (c, seen) => {
      await assert.rejects(c.enqueue({ kind: "k" }, { idempotencyKey: "a\r\nX-Other: 1" }), RangeError);
      await assert.rejects(c.cancel("1", { idempotencyKey: "caf\u00e9" }), RangeError);
      assert.equal(seen.length, 0);
    },
  );
});

test("records show result_job_id and result_expires_at; include=result; delete; stats", async () => {
  const key = "ts-record-1";
  const { job } = await env.idem.enqueue({ kind: "k", queue: "records" }, { idempotencyKey: key });
  const inProgress = await env.idem.record(key);
  assert.equal(inProgress.status, "in_progress");
  assert.equal(inProgress.result_job_id, undefined);
  const [claimed] = await env.idem.claim({ queues: ["records"], worker_id: "w" });
  assert.ok(claimed);
  await env.idem.complete(claimed, { n: 1 });
  const rec = await env.idem.record(key);
  assert.equal(rec.status, "completed");
  assert.equal(rec.job_id, job.id);
  assert.equal(rec.result_job_id, job.id);
  assert.ok(rec.result_expires_at && Date.parse(rec.result_expires_at) > Date.now());
  assert.equal(rec.result, undefined);
  assert.deepEqual((await env.idem.record(key, { includeResult: true })).result, { n: 1 });
  assert.ok((await env.idem.recordStats()).entries >= 1);
  await env.idem.deleteRecord(key);
  await assert.rejects(env.idem.record(key), (e: unknown) => e instanceof IdemError && e.status === 404);
  await assert.rejects(env.idem.deleteRecord(key), (e: unknown) => e instanceof IdemError && e.status === 404);
  await env.idem.enqueue({ kind: "k", queue: "records" }, { idempotencyKey: "." });
  await assert.rejects(env.idem.record("."), RangeError, "fetch would ask for /v1/idempotency/");
  await assert.rejects(env.idem.deleteRecord(".."), RangeError);
});

test("a dead-letter delete whose reply is lost is retried, and the retry's 404 means gone", async () => {
  const { job } = await env.idem.enqueue({ kind: "k", queue: "lost-delete" });
  const [claimed] = await env.idem.claim({ queues: ["lost-delete"], worker_id: "w", wait: "0s" });
  assert.ok(claimed);
  await env.idem.fail(claimed, "boom", { retry: false });
  await through(
    (s, n) => (n === 0 && s.method === "DELETE" ? "drop" : "pass"),
    { minBackoffMs: 10 },
    async (c, seen) => {
      await c.dlqDelete(job.id);
      // The retry's 404 is checked: the job is gone (GET answers 404 too).
      assert.deepEqual(seen.map((s) => s.method), ["DELETE", "DELETE", "GET"]);
    },
  );
  await assert.rejects(env.idem.getJob(job.id), (e: unknown) => e instanceof IdemError && e.status === 404);
});

test("a subscription delete whose reply is lost is retried, and the retry's 404 means gone", async () => {
  await env.idem.putSubscription("lost-topic", "s", { url: "http://127.0.0.1:9/s" });
  await through(
    (s, n) => (n === 0 && s.method === "DELETE" ? "drop" : "pass"),
    { minBackoffMs: 10 },
    (c) => c.deleteSubscription("lost-topic", "s"),
  );
  assert.deepEqual(await env.idem.subscriptions("lost-topic"), []);
});

test("a publish without a key whose reply is lost publishes once", async () => {
  const r = await through((s, n) => (n === 0 && s.method === "POST" ? "drop" : "pass"), { minBackoffMs: 10 }, (c) =>
    c.publish("lost-publish", { type: "t", payload: { n: 1 } }),
  );
  assert.equal(r.existing, true, "the retry answered the event the first attempt published");
  const events = [];
  for await (const e of env.idem.listEvents("lost-publish")) events.push(e);
  assert.equal(events.length, 1);
});

test("a dead-letter delete whose retry answers 404 for a job that is not dead fails", async () => {
  const { job } = await env.idem.enqueue({ kind: "k", queue: "delete-live" });
  await through(
    (s, n) => (n === 0 && s.method === "DELETE" ? { status: 503 } : "pass"),
    { minBackoffMs: 10 },
    async (c, seen) => {
      await assert.rejects(c.dlqDelete(job.id), (e: unknown) => e instanceof IdemError && e.status === 404);
      assert.deepEqual(seen.map((s) => s.method), ["DELETE", "DELETE", "GET"]);
    },
  );
  assert.equal((await env.idem.getJob(job.id)).state, "available");
});

test("an idempotency record delete is sent once: a lost reply is an error", async () => {
  const key = `once-${Date.now()}`;
  await env.idem.enqueue({ kind: "k", queue: "record-once", idempotency_key: key });
  await through(
    (s, n) => (n === 0 && s.method === "DELETE" ? "drop" : "pass"),
    { minBackoffMs: 10 },
    async (c, seen) => {
      await assert.rejects(c.deleteRecord(key), (e: unknown) => e instanceof IdemError && e.status === 0);
      assert.deepEqual(seen.map((s) => s.method), ["DELETE"]);
    },
  );
});

test("a keyed publish sends its key as the Idempotency-Key", async () => {
  await through(
    () => "pass",
    {},
    async (c, seen) => {
      await c.publish("keyed-publish", { key: "evt-1", type: "t", payload: { n: 1 } });
      assert.deepEqual(seen.map((s) => s.key), ["evt-1"]);
    },
  );
});

// A key that starts and ends with a double quote (a JSON-encoded id) is
// that key: the server, which reads a quoted header as a structured-field
// string, neither refuses it as differing from the body's key nor drops
// its quotes.
test("a key in double quotes is kept as it is", async () => {
  const key = JSON.stringify("ts-order-1");
  const a = await env.idem.enqueue({ kind: "k", queue: "quoted", idempotency_key: key });
  assert.equal(a.job.idempotency_key, key);
  const b = await env.idem.enqueue({ kind: "k", queue: "quoted" }, { idempotencyKey: key });
  assert.equal(b.existing, true);
  assert.equal(b.job.id, a.job.id);
  assert.equal((await env.idem.record(key)).job_id, a.job.id);
  const other = await env.idem.enqueue({ kind: "k", queue: "quoted" }, { idempotencyKey: "ts-order-1" });
  assert.equal(other.existing, false, "the key ts-order-1 is another key");
});

// A key that starts with a double quote but does not end with one, or
// with spaces around it, is that key too: it travels as a structured-field
// string (a bare value that starts with '"' is refused, and HTTP drops the
// spaces around a bare one).
test("keys with a leading quote or spaces around are kept as they are", async () => {
  for (const key of ['"ts-half', " ts padded ", '"ts\\"esc"']) {
    const a = await env.idem.enqueue({ kind: "k", queue: "quoted" }, { idempotencyKey: key });
    assert.equal(a.job.idempotency_key, key);
    const b = await env.idem.enqueue({ kind: "k", queue: "quoted" }, { idempotencyKey: key });
    assert.equal(b.existing, true, `the key ${key} again`);
    assert.equal(b.job.id, a.job.id);
  }
});

// The check a retried dead-letter delete makes (GET /v1/jobs/{id}) is a
// request of the client like any other: a transport failure of it is an
// IdemError of status 0 (never a bare TypeError of fetch), and it is
// retried as a GET, as the Go client's check is.
test("a dead-letter delete whose follow-up check gets no answer throws IdemError status 0", async () => {
  const dead = async (queue: string): Promise<string> => {
    const { job } = await env.idem.enqueue({ kind: "k", queue });
    const [claimed] = await env.idem.claim({ queues: [queue], worker_id: "w", wait: "0s" });
    assert.ok(claimed);
    await env.idem.fail(claimed, "boom", { retry: false });
    return job.id;
  };
  const lost = await dead("lost-check");
  await through(
    (s, n) => (n === 0 || s.method === "GET" ? "drop" : "pass"),
    { minBackoffMs: 10, maxRetries: 2 },
    async (c, seen) => {
      await assert.rejects(c.dlqDelete(lost), (e: unknown) => e instanceof IdemError && e.status === 0 && e.name === "IdemError");
      assert.deepEqual(seen.map((s) => s.method), ["DELETE", "DELETE", "GET", "GET", "GET"], "the check is retried as a GET");
    },
  );
  const once = await dead("lost-check-once");
  await through(
    (s, n) => (n === 0 || (s.method === "GET" && n === 2) ? "drop" : "pass"),
    { minBackoffMs: 10 },
    async (c, seen) => {
      await c.dlqDelete(once);
      assert.deepEqual(seen.map((s) => s.method), ["DELETE", "DELETE", "GET", "GET"]);
    },
  );
});
