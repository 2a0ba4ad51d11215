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
