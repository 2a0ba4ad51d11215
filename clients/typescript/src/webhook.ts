// Verification of webhook pushes, signed per the Standard Webhooks spec
// (webhook-id, webhook-timestamp, webhook-signature).
import { Webhook, WebhookVerificationError } from "standardwebhooks";

export { WebhookVerificationError };

export type WebhookHeaders = Record<string, string | string[] | undefined> | Headers;

function plain(h: WebhookHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  if (typeof Headers !== "undefined" && h instanceof Headers) {
    h.forEach((v, k) => (out[k.toLowerCase()] = v));
    return out;
  }
  for (const [k, v] of Object.entries(h)) {
    if (v === undefined) continue;
    out[k.toLowerCase()] = Array.isArray(v) ? v.join(",") : String(v);
  }
  return out;
}

/**
 * verifyWebhook checks the signature and timestamp (5 minutes of
 * tolerance) of a push with secret ("whsec_…" base64) and returns the
 * parsed JSON body; it throws WebhookVerificationError otherwise. Pass the
 * raw body exactly as received.
 */
export function verifyWebhook(secret: string, rawBody: string | Buffer, headers: WebhookHeaders): unknown {
  const body = typeof rawBody === "string" ? rawBody : rawBody.toString("utf8");
  return new Webhook(secret).verify(body, plain(headers));
}
