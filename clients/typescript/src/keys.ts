// Idempotency keys computed as idem's Go package key computes them, from
// the canonical JSON (RFC 8785) of a payload given as JSON text.
import { createHash } from "node:crypto";
import { canonicalize } from "./canonical.js";

/** keyHash is the lowercase hex SHA-256 of the canonical form of JSON text. */
export function keyHash(json: string | Uint8Array): string {
  return createHash("sha256").update(canonicalize(json), "utf8").digest("hex");
}

/**
 * scopedKey is seed 002's key, Go's key.Scoped: {tenant}_{user}_{action}_
 * {first 16 hex of the SHA-256 of the canonical payload}. A null or empty
 * tenant or user is an empty component; tenant and user must not contain
 * "_". payload is JSON text (JSON.stringify a value).
 */
export function scopedKey(tenant: string | null, user: string | null, action: string, payload: string | Uint8Array): string {
  tenant ??= "";
  user ??= "";
  if (tenant !== "") checkPart("tenant", tenant, "_");
  if (user !== "") checkPart("user", user, "_");
  checkPart("action", action, "");
  return `${tenant}_${user}_${action}_${keyHash(payload).slice(0, 16)}`;
}

/** contentKey is seed 001's key, Go's key.Prefixed: {prefix}_{SHA-256 of the canonical payload}. */
export function contentKey(prefix: string, payload: string | Uint8Array): string {
  checkPart("prefix", prefix, "");
  return `${prefix}_${keyHash(payload)}`;
}

/** checkPart refuses an empty part, lone surrogates, control characters (Cc) and the forbidden characters. */
function checkPart(name: string, s: string, forbidden: string): void {
  if (s === "") throw new RangeError(`${name} is empty`);
  if (/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(s)) throw new RangeError(`${name} is not valid Unicode`);
  if (/[\u0000-\u001f\u007f-\u009f]/.test(s)) throw new RangeError(`${name} contains a control character`);
  for (const ch of forbidden) if (s.includes(ch)) throw new RangeError(`${name} must not contain "${ch}"`);
}

/** The time granularity of a lock key: Go's key.Grain. */
export type Grain = "minute" | "hour" | "day";

/**
 * lockKey is seed 004's lock key, Go's key.Lock:
 * {function}:{tenant}:{grain date of time in zone}[:{entity hash}], e.g.
 * "detect-alerts:tenant-abc123:2026-02-06:971121298e66". The grain date is
 * YYYY-MM-DD (day), YYYY-MM-DDTHH (hour) or YYYY-MM-DDTHH:MM (minute) of
 * time in the IANA zone (default UTC). entities is a JSON object as JSON
 * text; null, empty or the JSON null leave the hash part and its ':' out
 * ("cdp-build:tenant-abc123:2026-02-06"). function and tenant must not
 * contain ':'. Bad parts, times and zones throw RangeError; bad JSON
 * throws CanonicalError.
 */
export function lockKey(fn: string, tenant: string, time: Date | string, zone: string | undefined, grain: Grain, entities: string | Uint8Array | null): string {
  checkPart("function", fn, ":");
  checkPart("tenant", tenant, ":");
  const k = `${fn}:${tenant}:${grainDate(time, zone || "UTC", grain)}`;
  // The BOM is kept (ignoreBOM): it is not JSON, as in Go and PHP.
  const text = typeof entities === "string" || entities === null ? entities : new TextDecoder("utf-8", { ignoreBOM: true }).decode(entities);
  // Only JSON's whitespace is trimmed (Go's key.JSONSpace): String.trim would
  // also drop \v, \f, U+00A0, U+2028 and the other spaces, which are not JSON.
  const bare = text === null ? null : text.replace(/^[ \t\n\r]+|[ \t\n\r]+$/g, "");
  if (bare === null || bare === "" || bare === "null") return k;
  return `${k}:${entityHash(entities ?? "")}`;
}

/**
 * entityHash is seed 004's computeEntityHash, Go's key.EntityHash: the
 * first 12 hex of the SHA-256 of entityCanonical(entities).
 */
export function entityHash(entities: string | Uint8Array): string {
  return createHash("sha256").update(entityCanonical(entities), "utf8").digest("hex").slice(0, 12);
}

/**
 * entityCanonical is the text entityHash hashes, Go's key.EntityCanonical:
 * the canonical JSON of the entities object's [name, value] pairs sorted by
 * name (UTF-16 code units, as JavaScript's default sort). entities must be
 * a JSON object (else RangeError).
 */
export function entityCanonical(entities: string | Uint8Array): string {
  const canon = canonicalize(entities);
  if (!canon.startsWith("{")) throw new RangeError("entities must be a JSON object");
  // The canonical object lists its members sorted by name; split it at its
  // top-level commas (rather than JSON.parse, which reorders names such as
  // "10" and "2") and rewrite {"a":1,"b":2} as [["a",1],["b",2]].
  const pairs: string[] = [];
  let depth = 0;
  let inString = false;
  let start = 1;
  for (let i = 1; i < canon.length; i++) {
    const c = canon[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
      continue;
    }
    if (c === '"') inString = true;
    else if (c === "{" || c === "[") depth++;
    else if ((c === "}" || c === "]") && depth > 0) depth--;
    else if ((c === "," && depth === 0) || i === canon.length - 1) {
      if (i > start) pairs.push(pair(canon.slice(start, i)));
      start = i + 1;
    }
  }
  return canonicalize(`[${pairs.join(",")}]`);
}

/** pair rewrites one canonical member "name":value as ["name",value]. */
function pair(member: string): string {
  let j = 1;
  while (member[j] !== '"') j += member[j] === "\\" ? 2 : 1;
  return `[${member.slice(0, j + 1)},${member.slice(j + 2)}]`;
}

/** grainDate formats time in zone as Go's Grain.Format does. */
function grainDate(time: Date | string, zone: string, grain: Grain): string {
  // A string must name its offset: JavaScript reads "2026-02-06T23:30"
  // in the host's zone but "2026-02-06" in UTC, and PHP both in its own.
  if (typeof time === "string" && !/(Z|[+-]\d{2}:?\d{2})$/i.test(time)) throw new RangeError(`time "${time}": want an offset (Z or ±hh:mm)`);
  const t = typeof time === "string" ? new Date(time) : time;
  if (!(t instanceof Date) || Number.isNaN(t.getTime())) throw new RangeError(`time ${String(time)} is not a valid time`);
  if (grain !== "minute" && grain !== "hour" && grain !== "day") throw new RangeError(`grain "${String(grain)}": want minute, hour or day`);
  let parts: Intl.DateTimeFormatPart[];
  try {
    parts = new Intl.DateTimeFormat("en-US", {
      timeZone: zone, year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", hourCycle: "h23",
    }).formatToParts(t);
  } catch (err) {
    throw new RangeError(`zone "${zone}": ${err instanceof Error ? err.message : String(err)}`);
  }
  const get = (type: Intl.DateTimeFormatPartTypes): string => parts.find((p) => p.type === type)?.value ?? "";
  const date = `${get("year").padStart(4, "0")}-${get("month")}-${get("day")}`;
  if (grain === "day") return date;
  if (grain === "hour") return `${date}T${get("hour")}`;
  return `${date}T${get("hour")}:${get("minute")}`;
}
