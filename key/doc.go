// Package key derives idempotency keys deterministically.
//
// # Canonical form
//
// Every key is computed from the canonical form of a JSON payload, which is
// exactly RFC 8785, the JSON Canonicalization Scheme (JCS): object members
// sorted by the UTF-16 code units of their names, no whitespace, numbers as
// IEEE 754 doubles printed the way ECMAScript's Number.prototype.toString
// prints them (so 1.0 is 1, -0 is 0, 1e21 is 1e+21 and integers beyond 2^53
// lose precision: send big identifiers as strings), and strings with only
// the escapes JCS requires. Clients in any language with a JCS library
// compute the same bytes and therefore the same keys; the vectors in
// testdata/key-vectors.json pin this down byte for byte.
//
// Input that is not strict JSON (RFC 8259) is rejected with an error wrapping
// [ErrInvalidJSON]: syntax errors, trailing data, invalid UTF-8, lone
// surrogates, duplicate object member names and numbers outside the range of
// a double.
//
// The only extension to JCS is [Options.Sets]: arrays named there by JSON
// Pointer are treated as sets and their elements are sorted by their own
// canonical bytes, so the order a client lists them in does not change the
// key. Without options the output is plain JCS.
//
// # Key formats
//
// The formats of the systems idem generalises:
//
//	Prefixed: {prefix}_{sha256 hex}                       batch_e49028d7…
//	Scoped:   {tenant}_{user}_{action}_{first 16 hex}     t_u_send_email_b1c2daf60412e169
//	Lock:     {function}:{tenant}:{grain date}[:{first 12 hex}]
//	          detect-alerts:tenant-abc123:2026-02-06:971121298e66
//
// Parts are validated (non-empty, valid UTF-8, no control characters, no
// separator where it would make the key ambiguous); failures wrap
// [ErrInvalidPart]. Both sentinels also wrap idemtype.ErrInvalid.
//
// [Fit] keeps a key that idem builds from parts (a topic delivery's, a
// batch item's) within a length limit: the key itself, or "sha256:" and
// the [Digest] (hex SHA-256) of its bytes when it is longer. Such keys are
// stored, so this format is frozen like the ones above.
//
// # Version tag
//
// [Version] names the derivation algorithm of this package ("v1": JCS,
// SHA-256, lowercase hex, the formats above). The v1 output is frozen: the
// vectors test fails if any byte changes. Keys produced by Prefixed, Scoped
// and Lock carry no tag, because they must equal the keys other clients and
// the seed systems already compute. A store that persists derived keys and
// wants to survive a future change of algorithm wraps them with
// [Versioned], which prepends "v1:" ("v1:batch_e490…"); [SplitVersion]
// takes such a key apart. A future algorithm will get a new Version ("v2")
// and new functions beside the v1 ones, never a changed v1: a key computed
// under v2 can never equal a stored v1 key by accident, and a stored v1 key
// tells its reader which algorithm to recompute it with, so dedup never
// breaks silently.
package key
