package webhook

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The vector published with the Standard Webhooks reference libraries; the
// same values appear in docs/webhooks.md for receivers in other languages.
const (
	vectorSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTimestamp = 1614265330
	vectorBody      = `{"test": 2432232314}`
	vectorSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func mustSecret(t testing.TB, s string) Secret {
	t.Helper()
	sec, err := ParseSecret(s)
	if err != nil {
		t.Fatalf("parse secret: %v", err)
	}
	return sec
}

func vectorHeaders(sig string) http.Header {
	h := http.Header{}
	h.Set(HeaderID, vectorID)
	h.Set(HeaderTimestamp, strconv.Itoa(vectorTimestamp))
	h.Set(HeaderSignature, sig)
	return h
}

func TestSign(t *testing.T) {
	t.Parallel()
	sec := mustSecret(t, vectorSecret)

	t.Run("matches the spec vector", func(t *testing.T) {
		t.Parallel()
		got := Sign(sec, vectorID, time.Unix(vectorTimestamp, 0), []byte(vectorBody))
		if got != vectorSignature {
			t.Fatalf("Sign = %q, want %q", got, vectorSignature)
		}
	})
	t.Run("signer with rotation emits one signature per secret", func(t *testing.T) {
		t.Parallel()
		other := NewSecret([]byte("0123456789abcdef0123456789abcdef"))
		s, err := NewSigner(other, sec)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		s.SetHeaders(h, vectorID, time.Unix(vectorTimestamp, 0), []byte(vectorBody))
		parts := strings.Split(h.Get(HeaderSignature), " ")
		if len(parts) != 2 || parts[1] != vectorSignature {
			t.Fatalf("signature header = %q", h.Get(HeaderSignature))
		}
		now := time.Unix(vectorTimestamp, 0)
		for _, only := range []Secret{sec, other} {
			if err := Verify([]Secret{only}, h, []byte(vectorBody), now, 0); err != nil {
				t.Fatalf("verify with one of the rotated secrets: %v", err)
			}
		}
	})
	t.Run("matches the example in docs/webhooks.md", func(t *testing.T) {
		t.Parallel()
		body := `{"job_id":42,"kind":"order.shipped","args":{"order":42},"attempt":2,"idempotency_key":"order-42:shipped","partition_key":"customer-9"}`
		got := Sign(sec, "order-42:shipped", time.Unix(1764133200, 0), []byte(body))
		if got != "v1,YCU7Wcl7mclLiJw7EWLj+gPh4bq8g9YRNAU2hJUx+Vk=" {
			t.Fatalf("Sign = %q", got)
		}
	})
	t.Run("signer refuses no secrets", func(t *testing.T) {
		t.Parallel()
		if _, err := NewSigner(); !errors.Is(err, ErrNoSecrets) {
			t.Fatalf("err = %v, want ErrNoSecrets", err)
		}
	})
}

func TestVerify(t *testing.T) {
	t.Parallel()
	sec := mustSecret(t, vectorSecret)
	at := time.Unix(vectorTimestamp, 0)
	tests := []struct {
		name    string
		headers http.Header
		body    string
		now     time.Time
		tol     time.Duration
		want    error
	}{
		{"valid", vectorHeaders(vectorSignature), vectorBody, at, 0, nil},
		{"valid among other versions", vectorHeaders("v1a,abc " + vectorSignature), vectorBody, at, 0, nil},
		{"valid after a malformed v1 entry", vectorHeaders("v1,!!! " + vectorSignature), vectorBody, at, 0, nil},
		{"body changed", vectorHeaders(vectorSignature), `{"test": 2432232315}`, at, 0, ErrNoMatchingSignature},
		{"wrong signature", vectorHeaders("v1,Zm9v"), vectorBody, at, 0, ErrNoMatchingSignature},
		{"only other versions", vectorHeaders("v2,Zm9v"), vectorBody, at, 0, ErrNoMatchingSignature},
		// Tokens without a comma are skipped, as the Standard Webhooks
		// reference libraries do: one of them never hides a valid v1
		// signature, and alone they match nothing.
		{"entry without comma", vectorHeaders("v1Zm9v"), vectorBody, at, 0, ErrNoMatchingSignature},
		{"valid after a token without comma", vectorHeaders("garbage " + vectorSignature), vectorBody, at, 0, nil},
		{"valid before a token without comma", vectorHeaders(vectorSignature + " v1a"), vectorBody, at, 0, nil},
		{"missing id", func() http.Header { h := vectorHeaders(vectorSignature); h.Del(HeaderID); return h }(), vectorBody, at, 0, ErrMissingHeader},
		{"missing signature", func() http.Header { h := vectorHeaders(""); return h }(), vectorBody, at, 0, ErrMissingHeader},
		{"timestamp not a number", func() http.Header { h := vectorHeaders(vectorSignature); h.Set(HeaderTimestamp, "1e9"); return h }(), vectorBody, at, 0, ErrInvalidHeader},
		{"too old by default tolerance", vectorHeaders(vectorSignature), vectorBody, at.Add(DefaultTolerance + time.Second), 0, ErrTimestampTooOld},
		{"old but within tolerance", vectorHeaders(vectorSignature), vectorBody, at.Add(DefaultTolerance), 0, nil},
		{"too new", vectorHeaders(vectorSignature), vectorBody, at.Add(-DefaultTolerance - time.Second), 0, ErrTimestampTooNew},
		{"custom tolerance", vectorHeaders(vectorSignature), vectorBody, at.Add(2 * time.Second), time.Second, ErrTimestampTooOld},
		// time.Unix overflows near the int64 limit into a time long past:
		// the timestamp is too new, not too old.
		{"largest timestamp", func() http.Header {
			h := vectorHeaders(vectorSignature)
			h.Set(HeaderTimestamp, "9223372036854775807")
			return h
		}(), vectorBody, at, 0, ErrTimestampTooNew},
		{"just too new", vectorHeaders(vectorSignature), vectorBody, at.Add(-DefaultTolerance - time.Second), 0, ErrTimestampTooNew},
		{"new but within tolerance", vectorHeaders(vectorSignature), vectorBody, at.Add(-DefaultTolerance), 0, nil},
		{"new within tolerance by half a second", vectorHeaders(vectorSignature), vectorBody, at.Add(-DefaultTolerance + 500*time.Millisecond), 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := Verify([]Secret{sec}, tt.headers, []byte(tt.body), tt.now, tt.tol)
			if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
				t.Fatalf("Verify = %v, want %v", err, tt.want)
			}
		})
	}
	t.Run("no secrets", func(t *testing.T) {
		t.Parallel()
		if err := Verify(nil, vectorHeaders(vectorSignature), []byte(vectorBody), at, 0); !errors.Is(err, ErrNoSecrets) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestSecret(t *testing.T) {
	t.Parallel()
	t.Run("never prints its key", func(t *testing.T) {
		t.Parallel()
		sec := mustSecret(t, vectorSecret)
		key := strings.TrimPrefix(vectorSecret, SecretPrefix)
		var logged bytes.Buffer
		slog.New(slog.NewJSONHandler(&logged, nil)).Info("x", "secret", sec, "cfg", struct{ S Secret }{sec})
		text, _ := sec.MarshalText()
		for _, out := range []string{
			fmt.Sprint(sec), fmt.Sprintf("%v %+v %#v %s %q %x", sec, sec, sec, sec, sec, sec),
			fmt.Sprintf("%+v", struct{ S Secret }{sec}), logged.String(), string(text),
			sec.String(), sec.GoString(), // called directly, as a fmt.Stringer consumer would
		} {
			if strings.Contains(out, key) || !strings.Contains(out, "****") {
				t.Fatalf("secret leaked or unmasked: %s", out)
			}
		}
		if sec.Reveal() != vectorSecret {
			t.Fatalf("Reveal = %q", sec.Reveal())
		}
	})
	t.Run("parse rejects bad input", func(t *testing.T) {
		t.Parallel()
		for _, in := range []string{"whsec_!!!", "whsec_c2hvcnQ=", ""} {
			if _, err := ParseSecret(in); !errors.Is(err, ErrInvalidSecret) {
				t.Fatalf("ParseSecret(%q) err = %v", in, err)
			}
		}
	})
}

// FuzzVerify feeds arbitrary header values: Verify must never panic, and must
// only accept a request whose signature header carries the true signature.
func FuzzVerify(f *testing.F) {
	f.Add(vectorID, strconv.Itoa(vectorTimestamp), vectorSignature, vectorBody)
	f.Add(vectorID, "-1", "v1,", "")
	f.Add("", "99999999999999999999", "v1a,x v1,y,z", "{}")
	f.Add("id", "1614265330", " v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=  ", "{}")
	sec, err := ParseSecret(vectorSecret)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, id, ts, sig, body string) {
		h := http.Header{}
		h.Set(HeaderID, id)
		h.Set(HeaderTimestamp, ts)
		h.Set(HeaderSignature, sig)
		unix, perr := strconv.ParseInt(ts, 10, 64)
		now := time.Unix(vectorTimestamp, 0)
		if perr == nil {
			now = time.Unix(unix, 0)
		}
		err := Verify([]Secret{sec}, h, []byte(body), now, 0)
		if err == nil && !strings.Contains(sig, strings.TrimPrefix(Sign(sec, id, now, []byte(body)), "v1,")) {
			t.Fatalf("accepted a request without its true signature: id=%q ts=%q sig=%q", id, ts, sig)
		}
	})
}

// TestVerifyHeaderNamesAnyCase: header names are case-insensitive, so a
// header map not built by net/http (lower-case keys, as a serverless event
// or a hand-made map carries them) verifies, and a signature on a second
// webhook-signature line (a proxy that split the list) is one of the list.
func TestVerifyHeaderNamesAnyCase(t *testing.T) {
	t.Parallel()
	sec := mustSecret(t, vectorSecret)
	at := time.Unix(vectorTimestamp, 0)
	ts := strconv.Itoa(vectorTimestamp)
	tests := []struct {
		name string
		h    http.Header
		want error
	}{
		{"lower-case keys", http.Header{"webhook-id": {vectorID}, "webhook-timestamp": {ts}, "webhook-signature": {vectorSignature}}, nil},
		{"upper-case keys", http.Header{"WEBHOOK-ID": {vectorID}, "WEBHOOK-TIMESTAMP": {ts}, "WEBHOOK-SIGNATURE": {vectorSignature}}, nil},
		{"lower-case keys, body of another id", http.Header{"webhook-id": {"msg_other"}, "webhook-timestamp": {ts}, "webhook-signature": {vectorSignature}}, ErrNoMatchingSignature},
		{"signature on a second line", http.Header{"Webhook-Id": {vectorID}, "Webhook-Timestamp": {ts}, "Webhook-Signature": {"v1,Zm9v", vectorSignature}}, nil},
		{"signature under a second spelling", http.Header{"Webhook-Id": {vectorID}, "Webhook-Timestamp": {ts}, "Webhook-Signature": {"v1,Zm9v"}, "webhook-signature": {vectorSignature}}, nil},
		{"no valid signature on any line", http.Header{"Webhook-Id": {vectorID}, "Webhook-Timestamp": {ts}, "Webhook-Signature": {"v1,Zm9v", "v1,YmFy"}}, ErrNoMatchingSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := Verify([]Secret{sec}, tt.h, []byte(vectorBody), at, 0)
			if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
				t.Fatalf("Verify = %v, want %v", err, tt.want)
			}
		})
	}
}
