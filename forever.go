package idem

import "time"

// DedupForever is a dedup window that never reopens: seed 001 keeps its keys
// indefinitely. It is 100 years, so every store keeps ordinary times (a
// record's dedup_until and expires_at are real times in the year 2126 and
// beyond) and retention never deletes the record or its job. Use it as
// Config.DedupWindow or EnqueueOpts.DedupWindow; over HTTP, send
// "dedup_window": "forever".
const DedupForever = 100 * 365 * 24 * time.Hour

// DedupForeverName is the spelling of DedupForever in the HTTP API and the
// CLI.
const DedupForeverName = "forever"
