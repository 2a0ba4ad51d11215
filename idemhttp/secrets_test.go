package idemhttp_test

import (
	"bytes"
	"context"
	"reflect"
	"testing"

	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/webhook"
)

// TestPutKeepsSecrets: PUT of a target or a subscription is idempotent.
// Without secrets it generates one only when it creates the row (shown in
// that reply once); a repeat — a retry after a lost reply, a declarative
// config applied again — keeps the stored secrets and shows none, so the
// receiver's verification keeps working. Given secrets replace them
// (rotation), [] / "" make pushes unsigned, and a later PUT without
// secrets keeps that too.
func TestPutKeepsSecrets(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]opener{"sqlite": openSQLite, "postgres": openPostgres} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, open, nil)
			for _, tc := range []struct {
				name, path, stored, field string
				body                      map[string]any
				rotate, unsigned          any
				createStatus              int // API.md: a subscription PUT answers 200 either way
			}{
				{"target", "/v1/targets/orders", "orders", "secrets", map[string]any{"url": "http://127.0.0.1:9/x", "queue": "q"},
					[]string{whsec(2), whsec(1)}, []string{}, 201},
				{"subscription", "/v1/topics/orders/subscriptions/billing", "orders/billing", "secret",
					map[string]any{"url": "http://127.0.0.1:9/x", "event_types": []string{"paid"}}, whsec(2), "", 200},
			} {
				t.Run(tc.name, func(t *testing.T) {
					storedSecrets := func() []string {
						t.Helper()
						list, err := e.st.TargetList(context.Background(), &store.TargetListParams{Tenant: "a"})
						if err != nil {
							t.Fatal(err)
						}
						for _, d := range list {
							if d.Name == tc.stored {
								return d.Secrets
							}
						}
						t.Fatalf("%s not stored", tc.stored)
						return nil
					}
					put := func(status int, body map[string]any) map[string]any {
						t.Helper()
						r := e.req("PUT", tc.path, e.keyA, body)
						expect(t, r, status, "")
						return r.json(t)
					}
					with := func(v any) map[string]any {
						b := map[string]any{tc.field: v}
						for k, x := range tc.body {
							b[k] = x
						}
						return b
					}

					first := put(tc.createStatus, tc.body)
					generated, _ := first["secret"].(string)
					if generated == "" || !reflect.DeepEqual(storedSecrets(), []string{generated}) {
						t.Fatalf("created: reply %v, stored %v", first, storedSecrets())
					}
					for range 2 {
						again := put(200, tc.body)
						if _, shown := again["secret"]; shown || again["secret_count"] != float64(1) {
							t.Fatalf("repeated PUT reply %v: want the secret kept, not shown", again)
						}
						if got := storedSecrets(); !reflect.DeepEqual(got, []string{generated}) {
							t.Fatalf("repeated PUT rotated the secret: stored %v, want [%s]", got, generated)
						}
					}
					// An explicit rotation replaces them; a PUT without
					// secrets after it keeps the rotated ones.
					rotated := put(200, with(tc.rotate))
					want := []string{whsec(2)}
					if tc.field == "secrets" {
						want = []string{whsec(2), whsec(1)}
					}
					if _, shown := rotated["secret"]; shown || !reflect.DeepEqual(storedSecrets(), want) {
						t.Fatalf("rotation: reply %v, stored %v, want %v", rotated, storedSecrets(), want)
					}
					put(200, tc.body)
					if got := storedSecrets(); !reflect.DeepEqual(got, want) {
						t.Fatalf("PUT after a rotation: stored %v, want %v", got, want)
					}
					// Unsigned stays unsigned.
					put(200, with(tc.unsigned))
					if got := put(200, tc.body); got["secret_count"] != float64(0) || len(storedSecrets()) != 0 {
						t.Fatalf("PUT after unsigned: reply %v, stored %v", got, storedSecrets())
					}
					// Deleted and put again: a new secret.
					expect(t, e.req("DELETE", tc.path, e.keyA, nil), 204, "")
					again := put(tc.createStatus, tc.body)
					if s, _ := again["secret"].(string); s == "" || s == generated || !reflect.DeepEqual(storedSecrets(), []string{s}) {
						t.Fatalf("recreated: reply %v, stored %v", again, storedSecrets())
					}
				})
			}
		})
	}
}

// whsec is a fixed signing secret (32 bytes of n).
func whsec(n byte) string {
	return webhook.NewSecret(bytes.Repeat([]byte{n}, 32)).Reveal()
}
