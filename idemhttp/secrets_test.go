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

// TestBadTargetURLHidesPassword: a target or subscription URL that does
// not parse is refused with a 400 that names the field, never the URL: the
// url.Parse error quotes the whole URL, password included, and the problem
// body reaches logs, CLI output and proxies.
func TestBadTargetURLHidesPassword(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	for _, raw := range []string{
		"https://u:s3cretpw@example.com:badport/x",
		"http://u:s3cretpw@[::1/x",
		"https://u:s3c%zzretpw@example.com/x",
		"NATS://s3cretpw@example.com:4222/subject", // a token, in a scheme spelt in capitals
		"ftp://u:s3cretpw@example.com/x",
	} {
		for _, tc := range []struct {
			path string
			body map[string]any
		}{
			{"/v1/targets/orders", map[string]any{"url": raw, "queue": "q"}},
			{"/v1/topics/orders/subscriptions/billing", map[string]any{"url": raw, "event_types": []string{"paid"}}},
		} {
			r := e.req("PUT", tc.path, e.keyA, tc.body)
			expect(t, r, 400, "")
			if bytes.Contains(r.body, []byte("s3c")) || bytes.Contains(r.body, []byte("retpw")) {
				t.Errorf("PUT %s with url %q: problem shows the password: %s", tc.path, raw, r.body)
			}
		}
	}
}

// TestNATSServerListRefused: a nats:// URL names one server. A server
// list (nats://u:p@a:4222,nats://u:p@b:4222/subject, as NATS clients take
// it) was stored with the second server and its password read as the
// subject, and every listing showed that password unmasked.
func TestNATSServerListRefused(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	for _, raw := range []string{
		"nats://u:s3cretpw@127.0.0.1:4222,nats://u:s3cretpw@127.0.0.2:4222/orders",
		"nats://s3cretpw@127.0.0.1:4222,s3cretpw@127.0.0.2:4222/orders",
	} {
		path := "/v1/topics/orders/subscriptions/billing"
		r := e.req("PUT", path, e.keyA, map[string]any{"url": raw, "event_types": []string{"paid"}})
		expect(t, r, 400, "")
		if bytes.Contains(r.body, []byte("s3cretpw")) {
			t.Errorf("PUT with url %q: problem shows the password: %s", raw, r.body)
		}
		if list := e.req("GET", "/v1/topics/orders/subscriptions", e.keyA, nil); bytes.Contains(list.body, []byte("s3cretpw")) {
			t.Errorf("url %q stored, listed with its password: %s", raw, list.body)
		}
	}
}
