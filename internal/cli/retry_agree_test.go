package cli

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestRetryFlagAgreesWithServer: `idem enqueue --retry SPEC` accepts and
// refuses what POST /v1/jobs with the same "retry" does, and names the same
// field when it refuses; a refusal is a usage error (exit 2) before any
// request. The CLI once parsed the object itself: it refused integer
// seconds ("30") the API takes, and dropped a max_attempts of 0 or an
// empty duration the API refuses.
func TestRetryFlagAgreesWithServer(t *testing.T) {
	t.Parallel()
	e := newCLIEnv(t)
	for _, tc := range []struct{ spec, field string }{
		{`{"base":"30","max":"600"}`, ""},
		{`{"max_attempts":3,"delays":["1m","2m"]}`, ""},
		{`{"jitter":0,"factor":1.5}`, ""},
		{`{"base":"2h","max":"8h"}`, ""},
		{`{"max_attempts":0}`, "retry.max_attempts"},
		{`{"base":""}`, "retry.base"},
		{`{"base":"-5s"}`, "retry.base"},
		{`{"base":"2h"}`, "retry.max"},
		{`{"max":"1s"}`, "retry.max"},
		{`{"delays":["1s"],"base":"1s"}`, "retry.delays"},
		{`{"delays":["1s","soon"]}`, "retry.delays[1]"},
		{`{"factor":0.5}`, "retry.factor"},
	} {
		// The server's answer to the same object.
		body := `{"kind":"k","retry":` + tc.spec + `}`
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
		apiOK := resp.StatusCode < 300
		if apiOK != (tc.field == "") || (!apiOK && prob.Errors[tc.field] == "") {
			t.Errorf("API %s: %d %v, want field %q", tc.spec, resp.StatusCode, prob.Errors, tc.field)
		}
		_, errs, code := e.run("enqueue", "k", "--retry", tc.spec)
		switch {
		case tc.field == "" && code != ExitOK:
			t.Errorf("idem enqueue --retry %s: exit %d (%s), the API accepts it", tc.spec, code, strings.TrimSpace(errs))
		case tc.field != "" && (code != ExitUsage || !strings.Contains(errs, tc.field)):
			t.Errorf("idem enqueue --retry %s: exit %d (%s), want a usage error naming %s as the API does", tc.spec, code, strings.TrimSpace(errs), tc.field)
		}
	}
}
