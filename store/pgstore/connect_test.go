package pgstore

import (
	"context"
	"strings"
	"testing"
)

// TestConnectErrorHidesPassword: Connect refuses an unescaped '@' in the
// user info before connecting, and its errors never quote a piece of the
// password (pgx.Connect's do: it resolves the host "twoxyz@127.0.0.1").
func TestConnectErrorHidesPassword(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url       string
		fragments []string
		want      string
	}{
		{"postgres://postgres:hunter@twoxyz@127.0.0.1:5432/test", []string{"hunter", "twoxyz"}, "%40"},
		{"postgres://postgres:hunter%zztwoxyz@127.0.0.1:5432/test", []string{"hunter", "twoxyz"}, ""},
		{"postgres://postgres:hunterTwoxyz@127.0.0.1:1/test", []string{"hunterTwoxyz"}, ""},
	} {
		conn, err := Connect(context.Background(), tc.url)
		if err == nil {
			conn.Close(context.Background())
			t.Errorf("%s: connected", tc.url)
			continue
		}
		for _, f := range tc.fragments {
			if strings.Contains(err.Error(), f) {
				t.Errorf("%s: error quotes %q of the password: %v", tc.url, f, err)
			}
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %q does not say %q", tc.url, err, tc.want)
		}
	}
}
