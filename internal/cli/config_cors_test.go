package cli

import (
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/idem-dev/idem/idemhttp"
)

// TestConfigCORSHeaders: http.cors_headers (IDEM_HTTP_CORS_HEADERS) sets
// the request headers a browser may send; by default idemhttp's, which
// hold seed 004's (authorization, x-client-info, apikey, content-type).
func TestConfigCORSHeaders(t *testing.T) {
	t.Parallel()
	seed004 := []string{"authorization", "x-client-info", "apikey", "content-type"}
	for _, tc := range []struct {
		name, file string
		env        []string
		want       []string
	}{
		{"default", "", nil, idemhttp.DefaultCORSHeaders()},
		{"file", "[http]\ncors_headers = [\"authorization\", \"x-client-info\", \"apikey\", \"content-type\"]\n", nil, seed004},
		// Seed 004's own header line, pasted as is: spaces after the commas.
		{"environment", "", []string{"IDEM_HTTP_CORS_HEADERS=authorization, x-client-info, apikey, content-type"}, seed004},
		{"any header", "", []string{"IDEM_HTTP_CORS_HEADERS=*"}, []string{"*"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := loadFile(t, tc.file, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.serverConfig(nil).CORS.AllowedHeaders; !slices.Equal(got, tc.want) {
				t.Fatalf("AllowedHeaders %q, want %q", got, tc.want)
			}
			text, err := printConfig(cfg)
			if err != nil || !strings.Contains(text, "cors_headers = [") {
				t.Fatalf("--print-config (%v) lacks cors_headers:\n%s", err, text)
			}
		})
	}
	for _, tc := range []struct {
		name, file string
		env        []string
	}{
		{"a space in a name", "[http]\ncors_headers = [\"x client\"]\n", nil},
		{"one string of several", "[http]\ncors_headers = \"authorization, apikey\"\n", nil},
		{"an empty list", "[http]\ncors_headers = []\n", nil},
		{"an empty name", "[http]\ncors_headers = [\"authorization\", \"\"]\n", nil},
		{"a trailing comma", "", []string{"IDEM_HTTP_CORS_HEADERS=authorization,"}},
		{"a colon", "", []string{"IDEM_HTTP_CORS_HEADERS=apikey: x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := loadFile(t, tc.file, tc.env)
			if err == nil || !strings.Contains(err.Error(), "http.cors_headers") {
				t.Fatalf("err %v, want one naming http.cors_headers", err)
			}
			if strings.Contains(err.Error(), "idemhttp config") {
				t.Fatalf("err %v: the key is reported twice", err)
			}
			if code, _ := classify(err); code != ExitUsage {
				t.Fatalf("exit code %d, want %d", code, ExitUsage)
			}
		})
	}
}

// TestServeCORSPreflight: a browser's preflight against a running `idem
// serve` is answered with the headers of IDEM_HTTP_CORS_HEADERS.
func TestServeCORSPreflight(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "idem.db")
	cmd, out := idemProcessEnv(t, []string{"IDEM_HTTP_CORS_ORIGINS=https://app.example",
		"IDEM_HTTP_CORS_HEADERS=authorization, x-client-info, apikey, content-type, x-app-version"},
		"serve", "--database", db, "--listen", "127.0.0.1:0")
	apiURL := ""
	for apiURL == "" && out.Scan() {
		if u, ok := strings.CutPrefix(out.Text(), "idem: api listening on "); ok {
			apiURL = u
		}
	}
	if apiURL == "" {
		t.Fatal("serve printed no address")
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodOptions, apiURL+"/v1/jobs", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Close = true // no idle connection left for goleak
	req.Header.Set("Origin", "https://app.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "apikey,authorization,content-type,x-app-version,x-client-info")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	want := "authorization, x-client-info, apikey, content-type, x-app-version"
	if res.StatusCode != http.StatusNoContent || res.Header.Get("Access-Control-Allow-Origin") != "https://app.example" ||
		res.Header.Get("Access-Control-Allow-Headers") != want {
		t.Fatalf("preflight: %d %v, want 204 allowing %q", res.StatusCode, res.Header, want)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve exited with %v, want 0", err)
	}
}
