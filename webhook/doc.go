// Package webhook signs, verifies and pushes webhooks per the Standard Webhooks
// specification (https://www.standardwebhooks.com).
//
// A request carries three headers: webhook-id (stable across retries of one
// message), webhook-timestamp (Unix seconds of this attempt) and
// webhook-signature, a space-separated list of "v1,<base64 HMAC-SHA256>" over
// "{id}.{timestamp}.{body}". Several signatures appear while a secret is being
// rotated. Secrets are written "whsec_<base64>".
//
// Senders use [Signer] and [Sender]; receivers written in Go use [Verify].
package webhook
