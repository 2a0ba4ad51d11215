// A proxy in front of a real `idem serve` that injects faults: it answers
// a request itself (a 503 with Retry-After), or forwards it and then drops
// the connection, so the client sees no reply to a request the server did;
// or forwards it and cuts its reply after the headers and half the body.
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * What the proxy does with one request: forward it, forward it and drop
 * the reply, forward it and cut the reply's body in half ("cut"), or
 * answer it.
 */
export type Fault = "pass" | "drop" | "cut" | { status: number; headers?: Record<string, string>; body?: unknown };

export interface Seen {
  method: string;
  path: string;
  key: string | undefined;
}

export interface FaultProxy {
  url: string;
  /** Every request received, in order. */
  seen: Seen[];
  close(): Promise<void>;
}

async function body(req: IncomingMessage): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const b of req) parts.push(b as Buffer);
  return Buffer.concat(parts);
}

/** startProxy forwards to target; fault(seen, n) decides the fate of the n-th request (0-based). */
export async function startProxy(target: string, fault: (s: Seen, n: number) => Fault): Promise<FaultProxy> {
  const seen: Seen[] = [];
  const srv = createServer((req, res) => {
    void (async () => {
      const s: Seen = { method: req.method ?? "", path: req.url ?? "", key: req.headers["idempotency-key"] as string | undefined };
      const what = fault(s, seen.length);
      seen.push(s);
      const data = await body(req);
      if (typeof what === "object") {
        res.writeHead(what.status, { "Content-Type": "application/problem+json", ...what.headers });
        res.end(JSON.stringify(what.body ?? { type: "/problems/service-unavailable", title: "Unavailable", status: what.status, detail: "injected" }));
        return;
      }
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) {
        if (typeof v === "string" && !["host", "connection", "content-length"].includes(k)) headers[k] = v;
      }
      const up = await fetch(target + s.path, { method: s.method, headers, ...(data.length ? { body: new Uint8Array(data) } : {}) });
      const out = Buffer.from(await up.arrayBuffer());
      if (what === "drop") {
        req.socket.destroy();
        return;
      }
      const h: Record<string, string> = {};
      up.headers.forEach((v, k) => {
        if (!["content-length", "content-encoding", "transfer-encoding", "connection"].includes(k)) h[k] = v;
      });
      if (what === "cut") {
        // The status and headers arrive, then half the body: the
        // connection ends before Content-Length bytes.
        res.writeHead(up.status, { ...h, "content-length": String(out.length) });
        res.write(out.subarray(0, out.length >> 1), () => req.socket.destroy());
        return;
      }
      res.writeHead(up.status, h);
      res.end(out);
    })().catch(() => req.socket.destroy());
  });
  await new Promise<void>((resolve) => srv.listen(0, "127.0.0.1", resolve));
  const { port } = srv.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        srv.closeAllConnections();
        srv.close(() => resolve());
      }),
  };
}
