// The routes the Go client offers as LeaseAcquire/Renew/Complete/Release,
// PutTarget/Targets/Target/DeleteTarget, LimitPut/Get/List/Delete,
// HealthChecks and RevokeAPIKey, against a real idem serve (any dead job
// is unhealthy on it: IDEM_HEALTH_DEAD_JOBS=0).
import { test } from "node:test";
import assert from "node:assert/strict";
import { Idem, IdemError } from "../src/index.js";
import { serverForFile } from "./server.js";
import { startProxy, type Fault, type Seen } from "./proxy.js";

const env = serverForFile({ env: { IDEM_HEALTH_DEAD_JOBS: "0" } });

/** through runs fn with a client whose requests pass a proxy with the faults of fault. */
async function through<T>(fault: (s: Seen, n: number) => Fault, fn: (c: Idem, seen: Seen[]) => Promise<T>): Promise<T> {
  const proxy = await startProxy(env.srv.url, fault);
  try {
    return await fn(new Idem({ baseUrl: proxy.url, apiKey: env.srv.adminKey, minBackoffMs: 10 }), proxy.seen);
  } finally {
    await proxy.close();
  }
}

const status = (want: number, type?: string) => (e: unknown) => e instanceof IdemError && e.status === want && (type === undefined || e.type === type);

test("result leases: acquire, held by another, renew, complete, then cached", async () => {
  const key = "ts-lease-1";
  const l = await env.idem.leaseAcquire(key, { lease: "1m", resultTtl: "1h" });
  assert.equal(l.acquired, true);
  assert.equal(l.cached, false);
  assert.ok(l.lease_token && l.lease_expires_at);
  const other = new Idem({ baseUrl: env.srv.url, apiKey: env.srv.adminKey, maxRetries: 0 });
  await assert.rejects(other.leaseAcquire(key), status(409, "idempotency-key-in-progress"), "held by another holder");
  const until = await env.idem.leaseRenew(key, l.lease_token, { lease: "10m" });
  assert.ok(Date.parse(until) > Date.parse(l.lease_expires_at), `renewed to ${until}, was ${l.lease_expires_at}`);
  await assert.rejects(env.idem.leaseRenew(key, "not-the-token"), status(409));
  const done = await env.idem.leaseComplete(key, l.lease_token, { area: 42 }, { durationMs: 7 });
  assert.equal(done.key, key);
  const cached = await env.idem.leaseAcquire(key);
  assert.equal(cached.cached, true);
  assert.equal(cached.acquired, false);
  assert.deepEqual(cached.result, { area: 42 });
  assert.equal(cached.duration_ms, 7);
});

test("a released lease caches nothing: the next acquire gets the lease", async () => {
  const key = "ts-lease-2";
  const l = await env.idem.leaseAcquire(key);
  await env.idem.leaseRelease(key, l.lease_token ?? "");
  const again = await env.idem.leaseAcquire(key);
  assert.equal(again.acquired, true);
  assert.notEqual(again.lease_token, l.lease_token);
  // Releasing a lease no longer held changes nothing: the new holder keeps it.
  await env.idem.leaseRelease(key, l.lease_token ?? "");
  const other = new Idem({ baseUrl: env.srv.url, apiKey: env.srv.adminKey, maxRetries: 0 });
  await assert.rejects(other.leaseAcquire(key), status(409, "idempotency-key-in-progress"));
});

test("a lease acquire whose reply is lost is retried with the same key: the caller holds the lease", async () => {
  const key = "ts-lease-lost";
  const l = await through(
    (s, n) => (n === 0 ? "drop" : "pass"),
    async (c, seen) => {
      const got = await c.leaseAcquire(key, { lease: "1m" });
      assert.equal(seen.length, 2);
      assert.equal(seen[0]?.key, seen[1]?.key, "one Idempotency-Key for both attempts");
      return got;
    },
  );
  assert.equal(l.acquired, true);
  await env.idem.leaseComplete(key, l.lease_token ?? "", "ok");
  assert.equal((await env.idem.leaseAcquire(key)).result, "ok");
});

test("targets: put creates then replaces, list, get, delete", async () => {
  const made = await env.idem.putTarget("ts-orders", { url: "http://127.0.0.1:9/hook", queue: "ts-hooks", timeout: "5s" });
  assert.equal(made.created, true);
  assert.ok(made.target.secret?.startsWith("whsec_"), "a generated secret, shown once");
  assert.equal(made.target.secret_count, 1);
  assert.equal(made.target.timeout, "5s");
  const again = await env.idem.putTarget("ts-orders", { url: "http://127.0.0.1:9/v2", queue: "ts-hooks", secrets: [] });
  assert.equal(again.created, false);
  assert.equal(again.target.secret, undefined);
  assert.equal(again.target.secret_count, 0);
  await assert.rejects(env.idem.putTarget("ts-nowhere", { url: "http://127.0.0.1:9/" }), status(400), "a target needs a queue or a kind");
  const list = await env.idem.listTargets();
  assert.deepEqual(list.map((t) => [t.name, t.url, t.secret]), [["ts-orders", "http://127.0.0.1:9/v2", undefined]]);
  assert.equal((await env.idem.getTarget("ts-orders")).url, "http://127.0.0.1:9/v2");
  await env.idem.deleteTarget("ts-orders");
  await assert.rejects(env.idem.deleteTarget("ts-orders"), status(404));
  await assert.rejects(env.idem.getTarget("ts-orders"), status(404));
});

test("limits: put, get, list, delete on queue, tenant and tenant-in-queue scopes", async () => {
  const queue = { queue: "ts-mail" };
  const tenant = { tenant: "ts-acme" };
  const both = { tenant: "ts-acme", queue: "ts-sms" };
  const l = await env.idem.putLimit(queue, { rate: "100/1m", concurrency: 5 });
  assert.deepEqual([l.queue, l.tenant, l.rate, l.concurrency], ["ts-mail", undefined, "100/1m", 5]);
  assert.equal(l.usage.running, 0);
  assert.equal((await env.idem.putLimit(tenant, { weight: 3 })).weight, 3);
  const b = await env.idem.putLimit(both, { concurrency: 1 });
  assert.deepEqual([b.tenant, b.queue, b.concurrency], ["ts-acme", "ts-sms", 1]);
  await assert.rejects(env.idem.putLimit(queue, { rate: "lots" }), status(400));
  await assert.rejects(env.idem.putLimit(queue, { weight: 2 }), status(400), "a weight is for tenant scopes");
  assert.equal((await env.idem.getLimit(both)).concurrency, 1);
  assert.equal((await env.idem.getLimit(queue)).rate, "100/1m");
  const list = await env.idem.listLimits();
  assert.deepEqual(list.map((x) => `${x.tenant ?? ""}/${x.queue ?? ""}`).sort(), ["/ts-mail", "ts-acme/", "ts-acme/ts-sms"]);
  await env.idem.deleteLimit(both);
  await assert.rejects(env.idem.getLimit(both), status(404));
  await assert.rejects(env.idem.deleteLimit(both), status(404));
  assert.equal((await env.idem.getLimit(tenant)).weight, 3, "the tenant's own limit is another scope");
  await assert.rejects(env.idem.getLimit({}), RangeError);
  const acme = new Idem({ baseUrl: env.srv.url, apiKey: env.srv.createKey("ts-acme").key });
  await assert.rejects(acme.putLimit(queue, { concurrency: 1 }), status(403), "a tenant key may not set limits");
  await env.idem.deleteLimit(queue);
  await env.idem.deleteLimit(tenant);
});

test("deletes of a target, a limit and an API key whose replies are lost are retried and succeed", async () => {
  await env.idem.putTarget("ts-lost", { url: "http://127.0.0.1:9/hook", kind: "ts-lost" });
  await env.idem.putLimit({ queue: "ts-lost" }, { concurrency: 2 });
  const { id } = env.srv.createKey("ts-lost");
  for (const del of [(c: Idem) => c.deleteTarget("ts-lost"), (c: Idem) => c.deleteLimit({ queue: "ts-lost" }), (c: Idem) => c.revokeApiKey(id)]) {
    await through(
      (_, n) => (n === 0 ? "drop" : "pass"),
      async (c, seen) => {
        await del(c);
        assert.deepEqual(seen.map((s) => s.method), ["DELETE", "DELETE"]);
      },
    );
  }
  await assert.rejects(env.idem.getTarget("ts-lost"), status(404));
  await assert.rejects(env.idem.getLimit({ queue: "ts-lost" }), status(404));
});

test("healthChecks: healthy, then an unhealthy report (the server's 503) is returned; asked once", async () => {
  const t = new Idem({ baseUrl: env.srv.url, apiKey: env.srv.adminKey, tenant: "ts-health" });
  const before = await t.healthChecks();
  assert.equal(before.status, "healthy");
  assert.equal(before.checks["dead_jobs"]?.status, "healthy");
  await t.enqueue({ kind: "k", queue: "ts-health", max_attempts: 1 });
  const [claimed] = await t.claim({ queues: ["ts-health"], worker_id: "w" });
  assert.ok(claimed);
  await t.fail(claimed, "boom", { retry: false });
  const after = await t.healthChecks();
  assert.equal(after.status, "unhealthy");
  assert.equal(after.checks["dead_jobs"]?.status, "unhealthy");
  assert.equal(after.checks["dead_jobs"]?.value, 1);
  assert.equal((await new Idem({ baseUrl: env.srv.url, apiKey: env.srv.adminKey, tenant: "ts-health-other" }).healthChecks()).status, "healthy", "of the client's tenant");
  await through(
    () => ({ status: 503, headers: { "Retry-After": "0" } }),
    async (c, seen) => {
      await assert.rejects(c.healthChecks(), status(503, "service-unavailable"), "a problem, not a report, is thrown");
      assert.equal(seen.length, 1, "a probe is not retried");
    },
  );
});

test("revokeApiKey: a revoked key is refused; tenant keys may not revoke; an unknown id is a 404", async () => {
  const { id, key } = env.srv.createKey("ts-victim");
  const victim = new Idem({ baseUrl: env.srv.url, apiKey: key, maxRetries: 0 });
  await victim.stats();
  await assert.rejects(victim.revokeApiKey(id), status(403));
  await env.idem.revokeApiKey(id);
  await assert.rejects(victim.stats(), status(401));
  await assert.rejects(env.idem.revokeApiKey("key_no_such_key"), status(404));
});
