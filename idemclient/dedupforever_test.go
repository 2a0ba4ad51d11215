package idemclient_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemclient"
)

// TestDedupForever: idemclient.DedupForever is idem.DedupForever, sent as
// the API's "forever", and the server keeps the key's window open for a
// century: its record's dedup_until is about 100 years after completion.
func TestDedupForever(t *testing.T) {
	t.Parallel()
	if idemclient.DedupForever != idem.DedupForever {
		t.Fatalf("idemclient.DedupForever %v, idem.DedupForever %v", idemclient.DedupForever, idem.DedupForever)
	}
	w := idemclient.DedupForever
	req := &idemclient.EnqueueRequest{Kind: "k", Queue: "forever", IdempotencyKey: "kept", DedupWindow: &w}
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), `"dedup_window":"forever"`) {
		t.Fatalf("request body %s: want dedup_window \"forever\"", body)
	}
	e := newAPI(t, nil)
	ctx := context.Background()
	e.enqueue(e.admin, req)
	job := e.claimOne(e.admin, "forever")
	if _, err := e.admin.Complete(ctx, job.ID, job.LeaseToken, json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	rec, err := e.admin.GetRecord(ctx, "kept")
	if err != nil {
		t.Fatal(err)
	}
	if rec.DedupUntil == nil || rec.DedupUntil.Before(time.Now().Add(99*365*24*time.Hour)) {
		t.Fatalf("dedup_until %v: want about 100 years from now", rec.DedupUntil)
	}
}
