package cli

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemclient"
)

// serveEnvAPI starts `idem serve` on a new SQLite file with env added and
// returns its API URL and admin key.
func serveEnvAPI(t *testing.T, env []string) (apiURL, key string) {
	t.Helper()
	db := filepath.Join(t.TempDir(), "idem.db")
	_, out := idemProcessEnv(t, env, "serve", "--database", db, "--listen", "127.0.0.1:0", "--log-level", "warn")
	for apiURL == "" && out.Scan() {
		line := out.Text()
		if strings.HasPrefix(line, "IDEM_API_KEY=") {
			key = strings.TrimPrefix(line, "IDEM_API_KEY=")
		}
		if strings.HasPrefix(line, "idem: api listening on ") {
			apiURL = strings.TrimPrefix(line, "idem: api listening on ")
		}
	}
	if apiURL == "" || key == "" {
		t.Fatalf("serve printed api %q key %q", apiURL, key)
	}
	go func() {
		for out.Scan() {
		}
	}()
	return apiURL, key
}

// TestServeDenyPrivateRefusesLoopbackTarget: `idem serve` with
// delivery.deny_private (IDEM_DELIVERY_DENY_PRIVATE=true) refuses a
// webhook target on 127.0.0.1 when it is put (400 naming url: the
// sender's address policy), while delivery.allow can let the loopback
// prefix through again. serve passed no DeliveryConfig, so the loopback
// target was always accepted (and pushed to).
func TestServeDenyPrivateRefusesLoopbackTarget(t *testing.T) {
	t.Parallel()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(hs.Close) // after the parallel subtests
	for _, c := range []struct {
		name    string
		env     []string
		refused bool
	}{
		{"deny_private", []string{"IDEM_DELIVERY_DENY_PRIVATE=true"}, true},
		{"deny_private with allow", []string{"IDEM_DELIVERY_DENY_PRIVATE=true", "IDEM_DELIVERY_ALLOW=127.0.0.0/8,::1/128"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			apiURL, key := serveEnvAPI(t, c.env)
			cl, err := idemclient.New(apiURL, &idemclient.Config{APIKey: key})
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = cl.PutTarget(ctx, "loopback", &idemclient.TargetPut{URL: hs.URL, Queue: "hooks"})
			if !c.refused {
				if err != nil {
					t.Fatalf("put of %s with the loopback prefix allowed: %v", hs.URL, err)
				}
				return
			}
			var pe *idemclient.Error
			if !errors.As(err, &pe) || pe.Status != http.StatusBadRequest || !strings.Contains(pe.Error(), "url") {
				t.Fatalf("put of %s under deny_private: %v, want a 400 naming url (the address policy)", hs.URL, err)
			}
		})
	}
}
