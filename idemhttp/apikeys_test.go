package idemhttp_test

import (
	"context"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemhttp"
)

// TestRevokeAPIKey: DELETE /v1/apikeys/{id} revokes a key and this node
// refuses it at once, although its cache would trust the key for an hour;
// only admin keys may revoke, and an unknown id is 404.
func TestRevokeAPIKey(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, &setupOpts{serverCfg: &idemhttp.Config{AuthCacheTTL: time.Hour}})
	secret, k := idemhttp.NewAPIKey("a", false, "to revoke", time.Now())
	if err := e.st.APIKeyCreate(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	expect(t, e.req("GET", "/v1/jobs?queue=default", secret, nil), 200, "") // verified and cached

	t.Run("a tenant key may not revoke", func(t *testing.T) {
		expect(t, e.req("DELETE", "/v1/apikeys/"+k.ID, e.keyA, nil), 403, "/problems/forbidden")
		expect(t, e.req("GET", "/v1/jobs?queue=default", secret, nil), 200, "")
	})
	t.Run("an unknown key is not found", func(t *testing.T) {
		expect(t, e.req("DELETE", "/v1/apikeys/key_nope", e.admin, nil), 404, "/problems/not-found")
	})
	t.Run("a revoked key is refused at once on this node", func(t *testing.T) {
		expect(t, e.req("DELETE", "/v1/apikeys/"+k.ID, e.admin, nil), 204, "")
		expect(t, e.req("GET", "/v1/jobs?queue=default", secret, nil), 401, "/problems/unauthorized")
		expect(t, e.req("DELETE", "/v1/apikeys/"+k.ID, e.admin, nil), 204, "") // again: no error
		keys, err := e.st.APIKeyList(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, got := range keys {
			if got.ID == k.ID && got.RevokedAt == nil {
				t.Fatal("the key is not revoked in the store")
			}
		}
	})
}
