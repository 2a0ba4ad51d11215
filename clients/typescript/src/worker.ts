// A pull-worker loop: claim with long poll, heartbeat while the handler
// runs, complete or fail, and stop cleanly when an AbortSignal fires.
import { IdemError, type ClaimedJob, type Duration, type Idem } from "./index.js";

/** Throw PermanentError from a handler to fail the job without retries. */
export class PermanentError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "PermanentError";
  }
}

export interface JobContext {
  /** Aborted when the lease is lost (a heartbeat was refused). */
  signal: AbortSignal;
}

export interface WorkerOptions {
  queues: string[];
  workerId: string;
  /** Runs one job; its return value (JSON) is the job's result. */
  handler: (job: ClaimedJob, ctx: JobContext) => Promise<unknown>;
  /** Stops the loop: no new claims; jobs in flight finish first. */
  signal: AbortSignal;
  /** Only these kinds; absent or empty: any kind (as the Go and PHP clients). */
  kinds?: string[];
  /** Jobs run at once (and the claim limit); default 1, at most 100. */
  concurrency?: number;
  /** Lease per claim and heartbeat; default "30s". */
  lease?: Duration;
  /**
   * Long-poll wait of a claim; default "20s". After a claim that a spent
   * rate limit held back, the next waits its retry_after instead (at most 60s).
   */
  wait?: Duration;
  /** Milliseconds between heartbeats; default a third of the lease. */
  heartbeatMs?: number;
  /** Errors of the loop itself (claims, completes); default console.error. */
  onError?: (err: unknown) => void;
}

/**
 * durationMs parses the durations of the API: Go durations ("30s", "1m",
 * "500ms") and whole seconds ("30"), which the server takes as well.
 */
export function durationMs(d: string): number {
  if (/^[0-9]+$/.test(d)) return Number(d) * 1000;
  const units: Record<string, number> = { ns: 1e-6, us: 1e-3, "µs": 1e-3, "μs": 1e-3, ms: 1, s: 1000, m: 60000, h: 3600000 };
  let total = 0;
  const re = /([0-9]*\.?[0-9]+)(ns|us|µs|μs|ms|s|m|h)/g;
  let m: RegExpExecArray | null;
  while ((m = re.exec(d)) !== null) {
    const n = m[1];
    const u = m[2];
    if (n === undefined || u === undefined) continue;
    total += Number(n) * (units[u] ?? 0);
  }
  return total;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}

/** The server's cap on a claim's wait, in milliseconds. */
const maxClaimWaitMs = 60_000;

/** The most bytes (UTF-8) fail accepts as "error". */
const maxErrorBytes = 64 << 10;

/**
 * errorText makes an error message acceptable as fail's "error": lone
 * surrogates replaced by U+FFFD, NUL removed, cut to 64 KiB of UTF-8 on a
 * character boundary.
 */
export function errorText(msg: string): string {
  let s = "";
  for (const ch of msg) {
    const c = ch.codePointAt(0) ?? 0;
    if (c === 0) continue;
    s += c >= 0xd800 && c <= 0xdfff ? "\ufffd" : ch;
  }
  const bytes = new TextEncoder().encode(s);
  if (bytes.length <= maxErrorBytes) return s;
  let end = maxErrorBytes;
  while (end > 0 && ((bytes[end] ?? 0) & 0xc0) === 0x80) end--; // not inside a character
  return new TextDecoder().decode(bytes.subarray(0, end));
}

function isAbort(err: unknown): boolean {
  return err instanceof Error && (err.name === "AbortError" || err.name === "TimeoutError");
}

/**
 * runWorker claims and runs jobs until opts.signal aborts; it resolves
 * after the jobs in flight are completed or failed. A handler that throws
 * fails its job (retried by the server's policy; PermanentError: dead now);
 * a result JSON cannot encode (a BigInt, a cycle) fails it without retry.
 */
export async function runWorker(client: Idem, opts: WorkerOptions): Promise<void> {
  const lease = opts.lease ?? "30s";
  const wait = opts.wait ?? "20s";
  const limit = Math.min(Math.max(opts.concurrency ?? 1, 1), 100);
  const beat = opts.heartbeatMs ?? Math.max(durationMs(lease) / 3, 100);
  const onError = opts.onError ?? ((err: unknown) => console.error("idem worker:", err));
  const running = new Set<Promise<void>>();

  const run = async (job: ClaimedJob): Promise<void> => {
    const lost = new AbortController();
    const timer = setInterval(() => {
      client.heartbeat(job, lease).catch((err: unknown) => {
        onError(err);
        // Only a refusal (lease lost, job gone) loses the lease; after a
        // transport error or a 5xx the next heartbeat tries again.
        // A lost lease is not renewed again (every later heartbeat would be
        // refused too, and reported to onError) while the handler winds down.
        if (err instanceof IdemError && (err.status === 404 || err.status === 409)) {
          clearInterval(timer);
          lost.abort(err);
        }
      });
    }, beat);
    try {
      let result: unknown;
      try {
        result = await opts.handler(job, { signal: lost.signal });
      } catch (err) {
        clearInterval(timer);
        const msg = err instanceof Error ? err.message : String(err);
        await client.fail(job, errorText(msg), { retry: !(err instanceof PermanentError) });
        return;
      }
      clearInterval(timer);
      try {
        JSON.stringify(result);
      } catch (err) {
        // complete could not send it: fail the job (no retry: the handler
        // would run again and return the same) rather than leave it
        // running until its lease expires and run it again.
        const msg = err instanceof Error ? err.message : String(err);
        await client.fail(job, errorText(`result is not JSON: ${msg}`), { retry: false });
        return;
      }
      await client.complete(job, result);
    } catch (err) {
      onError(err);
    } finally {
      clearInterval(timer);
    }
  };

  // After a claim that a spent rate limit held back, the next one
  // long-polls until the budget returns (its retry_after, at most the
  // server's 60s), as the Go client's ClaimWait: no polling in a loop, and
  // no waiting past the refill.
  let nextWait: Duration = wait;
  while (!opts.signal.aborted) {
    const free = limit - running.size;
    if (free <= 0) {
      await Promise.race(running);
      continue;
    }
    let jobs: ClaimedJob[];
    try {
      const res = await client.claimDetail(
        { queues: opts.queues, worker_id: opts.workerId, limit: free, lease, wait: nextWait, ...(opts.kinds?.length ? { kinds: opts.kinds } : {}) },
        { signal: opts.signal },
      );
      jobs = res.jobs;
      nextWait = res.retryAfterMs > 0 ? `${Math.min(Math.ceil(res.retryAfterMs) + 10, maxClaimWaitMs)}ms` : wait;
    } catch (err) {
      if (opts.signal.aborted || isAbort(err)) break;
      onError(err);
      await sleep(1000, opts.signal);
      continue;
    }
    for (const job of jobs) {
      const p = run(job).finally(() => running.delete(p));
      running.add(p);
    }
  }
  await Promise.all(running);
}
