package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDurationFlagsAgreeWithServer: `idem enqueue --dedup-window/--result-ttl/
// --timeout V` and the same fields of an `idem batch create --file` item
// accept and refuse what POST /v1/jobs with the same field does, naming
// the field when they refuse (exit 2). The CLI once parsed them with
// time.ParseDuration: it refused integer seconds ("3600") and the dedup
// window "forever", which the API takes.
func TestDurationFlagsAgreeWithServer(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	dir := t.TempDir()
	for i, tc := range []struct {
		field, value string
		ok           bool
	}{
		{"dedup_window", "3600", true},
		{"dedup_window", "forever", true},
		{"dedup_window", "0", true},
		{"dedup_window", "0s", true},
		{"dedup_window", "90m", true},
		{"dedup_window", "Forever", false},
		{"dedup_window", "-5s", false},
		{"dedup_window", "-1", false},
		{"dedup_window", "soon", false},
		{"dedup_window", "99999999999999", false},
		{"result_ttl", "3600", true},
		{"result_ttl", "168h", true},
		{"result_ttl", "0", false},
		{"result_ttl", "0s", false},
		{"result_ttl", "forever", false},
		{"result_ttl", "-1", false},
		{"timeout", "30", true},
		{"timeout", "1m30s", true},
		{"timeout", "forever", false},
		{"timeout", "-30", false},
	} {
		flag := "--" + strings.ReplaceAll(tc.field, "_", "-")
		// The server's answer to the same field.
		body := fmt.Sprintf(`{"kind":"k","idempotency_key":"api-%d",%q:%q}`, i, tc.field, tc.value)
		req, _ := http.NewRequest("POST", e.url+"/v1/jobs", bytes.NewReader([]byte(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+e.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var prob struct{ Errors map[string]string }
		_ = json.NewDecoder(resp.Body).Decode(&prob)
		resp.Body.Close()
		if apiOK := resp.StatusCode < 300; apiOK != tc.ok || (!apiOK && prob.Errors[tc.field] == "") {
			t.Errorf("API %s=%q: %d %v, want ok=%v", tc.field, tc.value, resp.StatusCode, prob.Errors, tc.ok)
		}
		check := func(what string, code int, errs string) {
			t.Helper()
			switch {
			case tc.ok && code != ExitOK:
				t.Errorf("%s: exit %d (%s), the API accepts it", what, code, strings.TrimSpace(errs))
			case !tc.ok && (code != ExitUsage || !strings.Contains(errs, tc.field)):
				t.Errorf("%s: exit %d (%s), want a usage error naming %s as the API does", what, code, strings.TrimSpace(errs), tc.field)
			}
		}
		_, errs, code := e.run("enqueue", "k", "--key", fmt.Sprintf("cli-%d", i), flag, tc.value)
		check(fmt.Sprintf("idem enqueue %s %s", flag, tc.value), code, errs)

		file := filepath.Join(dir, fmt.Sprintf("jobs-%d.json", i))
		item := fmt.Sprintf(`[{"kind":"k",%q:%q}]`, tc.field, tc.value)
		if err := os.WriteFile(file, []byte(item), 0o600); err != nil {
			t.Fatal(err)
		}
		_, errs, code = e.run("batch", "create", "--key", fmt.Sprintf("batch-%d", i), "--file", file)
		check("idem batch create "+item, code, errs)
	}
}
