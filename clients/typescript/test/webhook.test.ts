import { test } from "node:test";
import assert from "node:assert/strict";
import { Webhook } from "standardwebhooks";
import { verifyWebhook, WebhookVerificationError } from "../src/index.js";

const secret = "whsec_" + Buffer.from("0123456789abcdef0123456789abcdef").toString("base64");

function signed(body: string, at = new Date()) {
  const id = "msg_" + Math.random().toString(36).slice(2);
  const sig = new Webhook(secret).sign(id, at, body);
  return { "webhook-id": id, "webhook-timestamp": String(Math.floor(at.getTime() / 1000)), "webhook-signature": sig };
}

test("a signed push verifies and parses", () => {
  const body = JSON.stringify({ job_id: "42", kind: "send_email", args: { to: "a@example.com" } });
  assert.deepEqual(verifyWebhook(secret, body, signed(body)), { job_id: "42", kind: "send_email", args: { to: "a@example.com" } });
  const h = new Headers(signed(body));
  assert.deepEqual(verifyWebhook(secret, Buffer.from(body), h), JSON.parse(body));
});

test("a tampered body, another secret or an old timestamp fail", () => {
  const body = JSON.stringify({ job_id: "42" });
  const h = signed(body);
  assert.throws(() => verifyWebhook(secret, body.replace("42", "43"), h), WebhookVerificationError);
  const other = "whsec_" + Buffer.from("another secret of thirty-two bytes").toString("base64");
  assert.throws(() => verifyWebhook(other, body, h), WebhookVerificationError);
  assert.throws(() => verifyWebhook(secret, body, signed(body, new Date(Date.now() - 3600_000))), WebhookVerificationError);
  assert.throws(() => verifyWebhook(secret, body, {}), WebhookVerificationError);
});
