package idemhttp_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemhttp"
)

// rawHeaderRequest sends, on a new connection to addr, a GET /v1/jobs
// whose request line and headers (with their CRLFs and the blank line)
// are exactly size bytes, and returns the response.
func rawHeaderRequest(t *testing.T, addr, apiKey string, size int) (*http.Response, []byte) {
	t.Helper()
	resp, body, err := tryRawHeaderRequest(t, addr, apiKey, size)
	if err != nil {
		t.Fatalf("%d header bytes: %v", size, err)
	}
	return resp, body
}

// tryRawHeaderRequest is rawHeaderRequest returning the error of reading
// the response (a server that closes with the request unread may reset
// the connection before its answer is read): resp is nil when not even
// its status and headers were read.
func tryRawHeaderRequest(t *testing.T, addr, apiKey string, size int) (*http.Response, []byte, error) {
	t.Helper()
	head := "GET /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + apiKey + "\r\nX-Pad: "
	tail := "\r\n\r\n"
	pad := size - len(head) - len(tail)
	if pad < 1 {
		t.Fatalf("size %d is too small", size)
	}
	req := head + strings.Repeat("a", pad) + tail
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.WriteString(c, req) }() // the server may stop reading
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp, nil, fmt.Errorf("read the body: %w", err)
	}
	return resp, body, nil
}

// TestHeaderLimitProblem (real 127.0.0.1 listener, raw requests): request
// headers of exactly MaxHeaderBytes (64 KiB) are served; one byte more,
// and up to the hard limit NewHTTPServer gives net/http, is a 431
// application/problem+json /problems/request-headers-too-large (net/http
// answered its own text/plain 431 from MaxHeaderBytes plus its 4 KiB read
// slack, and served what lay between); far above, net/http's own plain
// 431 still answers (docs/limits.md).
func TestHeaderLimitProblem(t *testing.T) {
	t.Parallel()
	ls := startLive(t, nil)
	const limit = idemhttp.DefaultMaxHeaderBytes
	resp, body := rawHeaderRequest(t, ls.addr, ls.admin, limit)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d header bytes: status %d, want 200: %s", limit, resp.StatusCode, body)
	}
	for _, size := range []int{limit + 1, limit + 4096, limit + 12<<10} {
		resp, body := rawHeaderRequest(t, ls.addr, ls.admin, size)
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("%d header bytes: status %d, want 431: %s", size, resp.StatusCode, body)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
			t.Fatalf("%d header bytes: Content-Type %q, want application/problem+json: %s", size, ct, body)
		}
		var p struct {
			Type   string `json:"type"`
			Status int    `json:"status"`
			Detail string `json:"detail"`
		}
		if err := json.Unmarshal(body, &p); err != nil {
			t.Fatalf("%d header bytes: %v: %s", size, err, body)
		}
		if p.Type != "/problems/request-headers-too-large" || p.Status != 431 || !strings.Contains(p.Detail, "65536") {
			t.Fatalf("%d header bytes: %s", size, body)
		}
		if resp.Header.Get("X-Request-Id") == "" {
			t.Fatalf("%d header bytes: no X-Request-Id", size)
		}
	}
	// Above the hard limit net/http answers before any handler runs, and
	// closes with the rest unread: the client may see a reset instead.
	for attempt := 0; ; attempt++ {
		resp, body, err := tryRawHeaderRequest(t, ls.addr, ls.admin, 1<<20)
		if resp == nil {
			if attempt == 20 {
				t.Fatalf("1 MiB of headers: %v", err)
			}
			continue
		}
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || strings.Contains(resp.Header.Get("Content-Type"), "json") {
			t.Fatalf("1 MiB of headers: status %d, Content-Type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		break
	}
}
