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

// TestExplicitZeroAgreesWithServer: a value of 0 (or below) the API
// refuses is refused by the CLI command that sends it, naming the field
// (exit 2), where the CLI used to drop it as "not given" and take the
// server's default: max_attempts 0 in an `idem batch create --file` job or
// its --on-finish job, `idem topics subscribe --max-attempts 0`, `idem
// topics events --limit 0` (or -1). 1 is taken by both; an events page
// of 501 is refused by both.
func TestExplicitZeroAgreesWithServer(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain.json")
	if err := os.WriteFile(plain, []byte(`[{"kind":"k"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	api := func(method, path, body string) (bool, map[string]string) {
		t.Helper()
		req, _ := http.NewRequest(method, e.url+path, bytes.NewReader([]byte(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+e.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var prob struct{ Errors map[string]string }
		_ = json.NewDecoder(resp.Body).Decode(&prob)
		return resp.StatusCode < 300, prob.Errors
	}
	for i, n := range []int{0, -1, 1} {
		ok := n >= 1
		check := func(what string, apiOK bool, apiErrs map[string]string, field string, args ...string) {
			t.Helper()
			if apiOK != ok || (!apiOK && !strings.Contains(fmt.Sprint(apiErrs), field)) {
				t.Errorf("API %s %d: ok=%v %v, want ok=%v naming %s", what, n, apiOK, apiErrs, ok, field)
			}
			_, errs, code := e.run(args...)
			switch {
			case ok && code != ExitOK:
				t.Errorf("idem %s: exit %d (%s), the API accepts it", strings.Join(args, " "), code, strings.TrimSpace(errs))
			case !ok && (code != ExitUsage || !strings.Contains(errs, field)):
				t.Errorf("idem %s: exit %d (%s), want a usage error naming %s as the API does", strings.Join(args, " "), code, strings.TrimSpace(errs), field)
			}
		}

		job := fmt.Sprintf(`{"kind":"k","max_attempts":%d}`, n)
		apiOK, apiErrs := api("POST", "/v1/batches", fmt.Sprintf(`{"key":"api-%d","jobs":[%s]}`, i, job))
		file := filepath.Join(dir, fmt.Sprintf("jobs-%d.json", i))
		if err := os.WriteFile(file, []byte("["+job+"]"), 0o600); err != nil {
			t.Fatal(err)
		}
		check("batch job max_attempts", apiOK, apiErrs, "max_attempts", "batch", "create", "--key", fmt.Sprintf("cli-%d", i), "--file", file)

		apiOK, apiErrs = api("POST", "/v1/batches", fmt.Sprintf(`{"key":"api-of-%d","jobs":[{"kind":"k"}],"on_finish":%s}`, i, job))
		check("on_finish max_attempts", apiOK, apiErrs, "max_attempts",
			"batch", "create", "--key", fmt.Sprintf("cli-of-%d", i), "--file", plain, "--on-finish", job)

		apiOK, apiErrs = api("PUT", fmt.Sprintf("/v1/topics/t/subscriptions/api-%d", i),
			fmt.Sprintf(`{"url":"http://127.0.0.1:9/h","max_attempts":%d}`, n))
		check("subscription max_attempts", apiOK, apiErrs, "max_attempts",
			"topics", "subscribe", "t", fmt.Sprintf("cli-%d", i), "--target-url", "http://127.0.0.1:9/h", "--max-attempts", fmt.Sprint(n))

		apiOK, apiErrs = api("GET", fmt.Sprintf("/v1/topics/t/events?limit=%d", n), "")
		check("events limit", apiOK, apiErrs, "limit", "topics", "events", "t", "--limit", fmt.Sprint(n))
	}
	// Past the largest page: refused by both alike.
	if ok, errs := api("GET", "/v1/topics/t/events?limit=501", ""); ok || errs["limit"] == "" {
		t.Errorf("API events limit 501: ok=%v %v", ok, errs)
	}
	if _, errs, code := e.run("topics", "events", "t", "--limit", "501"); code != ExitUsage || !strings.Contains(errs, "limit") {
		t.Errorf("idem topics events --limit 501: exit %d (%s), want a usage error naming limit", code, errs)
	}
}
