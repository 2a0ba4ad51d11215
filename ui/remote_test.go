package ui_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/internal/sqlitetest"
	"github.com/idem-dev/idem/store/sqlitestore"
	"github.com/idem-dev/idem/ui"
)

// lockedBuffer is a bytes.Buffer safe for the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestAPICallsLogTheBrowsersAddress: the API's access-log line of a call
// the dashboard makes for a browser names the browser's address, as a
// call to the API would; it named "127.0.0.1:0" (the dashboard's calls are
// in-process), so the log could not tell who cancelled a job from the
// dashboard, whose own requests are not logged.
func TestAPICallsLogTheBrowsersAddress(t *testing.T) {
	t.Parallel()
	st, err := sqlitestore.Open(context.Background(), sqlitetest.Path(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	client, err := idem.NewClient(st, &idem.Config{DisableMaintenance: true})
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	api, err := idemhttp.NewServer(client, st, &idemhttp.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	h, err := ui.New(api, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e := &env{t: t, st: st, srv: srv, api0: api}
	e.keyA = e.newKey("a", false)
	id := e.enqueue(e.keyA, "q", "k", map[string]any{})
	c := e.login(e.keyA)
	tok := e.csrf("/ui/jobs", c)
	if page := e.submit(t, "/ui/jobs/"+id+"/cancel", url.Values{"csrf": {tok}}, c); !strings.Contains(page, "cancelled") {
		t.Fatalf("cancel:\n%s", page)
	}
	// The in-process call logs before the dashboard answers.
	m := regexp.MustCompile(`method=POST path=/v1/jobs/` + id + `/cancel status=200 .* remote=(\S+)`).FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no access-log line of the cancel:\n%s", logs.String())
	}
	if !regexp.MustCompile(`^127\.0\.0\.1:[1-9]\d*$`).MatchString(m[1]) {
		t.Fatalf("the cancel's access-log line names remote %s, not the browser's address", m[1])
	}
}
