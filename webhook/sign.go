package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The Standard Webhooks header names.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// signatureVersion prefixes each symmetric (HMAC-SHA256) signature.
const signatureVersion = "v1"

// ErrNoSecrets reports a signer or verifier given no secret.
var ErrNoSecrets = errors.New("webhook: no secrets")

// Sign returns the "v1,<base64>" signature of body sent as message id at ts.
func Sign(secret Secret, id string, ts time.Time, body []byte) string {
	return signatureVersion + "," + base64.StdEncoding.EncodeToString(mac(secret, id, ts.Unix(), body))
}

// mac is HMAC-SHA256 over "{id}.{timestamp}.{body}".
func mac(secret Secret, id string, unix int64, body []byte) []byte {
	h := hmac.New(sha256.New, secret.key)
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write(strconv.AppendInt(nil, unix, 10))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Signer signs with one or more secrets. During rotation it holds the new and
// the old secret, so receivers that know either accept the request.
type Signer struct {
	secrets []Secret
}

// NewSigner returns a signer for the given secrets, in signature order.
func NewSigner(secrets ...Secret) (*Signer, error) {
	if len(secrets) == 0 {
		return nil, ErrNoSecrets
	}
	for _, s := range secrets {
		if s.IsZero() {
			return nil, ErrInvalidSecret
		}
	}
	return &Signer{secrets: append([]Secret(nil), secrets...)}, nil
}

// Signature returns the webhook-signature header value: one "v1,<base64>" per
// secret, separated by spaces.
func (s *Signer) Signature(id string, ts time.Time, body []byte) string {
	sigs := make([]string, len(s.secrets))
	for i, sec := range s.secrets {
		sigs[i] = Sign(sec, id, ts, body)
	}
	return strings.Join(sigs, " ")
}

// SetHeaders sets the three Standard Webhooks headers on h.
func (s *Signer) SetHeaders(h http.Header, id string, ts time.Time, body []byte) {
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderSignature, s.Signature(id, ts, body))
}
