// Starts a real `idem serve` on a temp SQLite file and a free port.
import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { before, after } from "node:test";
import { tmpdir } from "node:os";
import { join, resolve, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { Idem } from "../src/index.js";

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../../../..");

export interface TestServer {
  url: string;
  adminKey: string;
  /** createKey makes an API key in the server's database (`idem apikey create`): its id (key_…) and secret. */
  createKey(tenant: string, admin?: boolean): { id: string; key: string };
  stop(): Promise<void>;
}

/** Options of startServer. */
export interface ServerOptions {
  /** Variables added to the server's environment (IDEM_HEALTH_DEAD_JOBS, …). */
  env?: Record<string, string>;
}

let built: string | undefined;

/** idemBinary builds ./cmd/idem once per process (or uses $IDEM_BIN). */
export function idemBinary(): string {
  if (process.env.IDEM_BIN) return process.env.IDEM_BIN;
  if (built) return built;
  const dir = mkdtempSync(join(tmpdir(), "idem-ts-bin-"));
  const bin = join(dir, "idem");
  execFileSync("go", ["build", "-o", bin, "./cmd/idem"], { cwd: repoRoot, stdio: "inherit" });
  built = bin;
  process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
  return bin;
}

export async function startServer(opts: ServerOptions = {}): Promise<TestServer> {
  const dir = mkdtempSync(join(tmpdir(), "idem-ts-"));
  const db = join(dir, "idem.db");
  const child: ChildProcess = spawn(idemBinary(), ["serve", "--database", db, "--listen", "127.0.0.1:0", "--log-level", "warn"], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...opts.env },
  });
  let out = "";
  let errOut = "";
  child.stderr?.on("data", (b: Buffer) => (errOut += b.toString()));
  const { url, adminKey } = await new Promise<{ url: string; adminKey: string }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`idem serve did not start: ${out} ${errOut}`)), 30000);
    child.on("exit", (code) => reject(new Error(`idem serve exited ${code}: ${out} ${errOut}`)));
    child.stdout?.on("data", (b: Buffer) => {
      out += b.toString();
      const key = /IDEM_API_KEY=(\S+)/.exec(out)?.[1];
      const url = /api listening on (http:\/\/\S+)/.exec(out)?.[1];
      if (key && url) {
        clearTimeout(timer);
        resolve({ url, adminKey: key });
      }
    });
  });
  return {
    url,
    adminKey,
    createKey: (tenant, admin = false) => {
      const args = ["apikey", "create", "--database", db, "--tenant", tenant, "--json", ...(admin ? ["--admin"] : [])];
      const made = JSON.parse(execFileSync(idemBinary(), args, { encoding: "utf8" })) as { id: string; key: string };
      return { id: made.id, key: made.key };
    },
    stop: () =>
      new Promise<void>((resolve) => {
        child.removeAllListeners("exit");
        child.on("exit", () => {
          rmSync(dir, { recursive: true, force: true });
          resolve();
        });
        child.kill("SIGTERM");
      }),
  };
}

/** The server of a test file and an admin client of it (FileServer). */
export interface FileServer {
  /** The running server; set by the file's before(). */
  readonly srv: TestServer;
  /** A client of srv with its admin key; set by the file's before(). */
  readonly idem: Idem;
}

/**
 * serverForFile registers the file's before() and after(): a real server
 * (startServer) and an admin client of it before the first test, the
 * server stopped after the last. Call it once at the top of a test file;
 * srv and idem throw when read outside a test.
 */
export function serverForFile(opts: ServerOptions = {}): FileServer {
  let srv: TestServer | undefined;
  let idem: Idem | undefined;
  before(async () => {
    srv = await startServer(opts);
    idem = new Idem({ baseUrl: srv.url, apiKey: srv.adminKey });
  });
  after(async () => {
    await srv?.stop();
  });
  const unset = (): never => {
    throw new Error("serverForFile: the server is started by before(), read it inside a test");
  };
  return {
    get srv() {
      return srv ?? unset();
    },
    get idem() {
      return idem ?? unset();
    },
  };
}

/**
 * roomyRate is `n` jobs per an hour or a little more (whole minutes), in a
 * window that does not end in the next five minutes. idem's rate windows are
 * fixed and aligned to the Unix epoch: a test that spends a budget and then
 * expects to be throttled fails when a window ends between its claims (a
 * whole hour did, once in 3,600 runs). Returns the rate and its period.
 */
export function roomyRate(n: number): { rate: string; periodMs: number } {
  const now = Date.now();
  let minutes = 60;
  while (minutes * 60_000 - (now % (minutes * 60_000)) < 5 * 60_000) minutes++;
  const per = minutes % 60 === 0 ? `${minutes / 60}h` : `${minutes}m`;
  return { rate: `${n}/${per}`, periodMs: minutes * 60_000 };
}
