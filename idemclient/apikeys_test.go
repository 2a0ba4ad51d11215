package idemclient_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemclient"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/idemtype"
)

// TestRevokeAPIKey: an admin revokes a key through DELETE /v1/apikeys/{id};
// the key is refused afterwards, and a tenant key may not revoke.
func TestRevokeAPIKey(t *testing.T) {
	t.Parallel()
	e := newAPI(t, nil)
	ctx := context.Background()
	secret, k := idemhttp.NewAPIKey("acme", false, "victim", time.Now())
	if err := e.st.APIKeyCreate(ctx, k); err != nil {
		t.Fatal(err)
	}
	victim, err := idemclient.New(e.url, &idemclient.Config{APIKey: secret, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := victim.Stats(ctx); err != nil {
		t.Fatalf("before revoking: %v", err)
	}
	if err := victim.RevokeAPIKey(ctx, k.ID); err == nil {
		t.Fatal("a tenant key revoked a key")
	}
	if err := e.admin.RevokeAPIKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	var pe *idemclient.Error
	if _, err := victim.Stats(ctx); !errors.As(err, &pe) || pe.Status != 401 {
		t.Fatalf("a revoked key: %v", err)
	}
	if err := e.admin.RevokeAPIKey(ctx, "no-such-key"); !errors.Is(err, idemtype.ErrNotFound) {
		t.Fatalf("an unknown key: %v", err)
	}
}
