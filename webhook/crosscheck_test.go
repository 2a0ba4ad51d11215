package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// standardwebhooksVersion pins the npm reference implementation used for the
// cross-check.
const standardwebhooksVersion = "1.1.1"

// crossCheckScript verifies Go's headers with the npm reference library and
// signs a message of its own for Go to verify.
const crossCheckScript = `
const { Webhook } = require("standardwebhooks");
const input = JSON.parse(require("fs").readFileSync(0, "utf8"));
const wh = new Webhook(input.secret);
const verified = wh.verify(input.body, input.headers);
const ts = new Date(input.timestamp * 1000);
process.stdout.write(JSON.stringify({
  verified: JSON.stringify(verified),
  vector: wh.sign(input.vector_id, new Date(input.vector_ts * 1000), input.vector_body),
  signature: wh.sign(input.id, ts, input.body),
}));
`

// TestCrossCheckNode checks Sign and Verify against the npm
// "standardwebhooks" package. It skips only when node is not installed.
func TestCrossCheckNode(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("IDEM_REQUIRE_NODE") != "" {
			t.Fatal("node is not on PATH and IDEM_REQUIRE_NODE is set: the npm standardwebhooks cross-check must run")
		}
		t.Skip("SKIP: node is not on PATH; the npm standardwebhooks cross-check did not run")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatalf("node is installed but npm is not: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	install := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund", "--silent", "--prefix", dir, "standardwebhooks@"+standardwebhooksVersion)
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("npm install standardwebhooks: %v\n%s", err, out)
	}
	script := filepath.Join(dir, "check.js")
	if err := os.WriteFile(script, []byte(crossCheckScript), 0o600); err != nil {
		t.Fatal(err)
	}

	sec := mustSecret(t, vectorSecret)
	signer, err := NewSigner(sec)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	id, body := "job_42", `{"job_id":42,"kind":"order.shipped","args":{"n":"é\u2028"}}`
	h := http.Header{}
	signer.SetHeaders(h, id, now, []byte(body))
	in, _ := json.Marshal(map[string]any{
		"secret": vectorSecret, "id": id, "timestamp": now.Unix(), "body": body,
		"headers": map[string]string{
			HeaderID: h.Get(HeaderID), HeaderTimestamp: h.Get(HeaderTimestamp), HeaderSignature: h.Get(HeaderSignature),
		},
		"vector_id": vectorID, "vector_ts": vectorTimestamp, "vector_body": vectorBody,
	})
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node verify/sign: %v\n%s", err, stderr.String())
	}
	var got struct{ Verified, Vector, Signature string }
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("decode node output %q: %v", out, err)
	}

	t.Run("node verifies Go's signature", func(t *testing.T) {
		if !strings.Contains(got.Verified, `"order.shipped"`) {
			t.Fatalf("node returned %q", got.Verified)
		}
	})
	t.Run("node signs the spec vector as Go does", func(t *testing.T) {
		if got.Vector != vectorSignature {
			t.Fatalf("node vector = %q, want %q", got.Vector, vectorSignature)
		}
	})
	t.Run("Go verifies node's signature", func(t *testing.T) {
		nh := http.Header{}
		nh.Set(HeaderID, id)
		nh.Set(HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
		nh.Set(HeaderSignature, got.Signature)
		if err := Verify([]Secret{sec}, nh, []byte(body), now, 0); err != nil {
			t.Fatalf("Verify(node signature %q): %v", got.Signature, err)
		}
	})
}
