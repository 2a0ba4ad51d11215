package idemhttp_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// BenchmarkEnqueueHandler serves POST /v1/jobs with a new Idempotency-Key
// per request through the whole handler chain (request id, CORS, metrics,
// auth, decoding, the client, the SQLite store with durable commits,
// encoding) without a socket: what the server spends besides net/http.
// Parallel, so that the store's group commit batches as under load.
func BenchmarkEnqueueHandler(b *testing.B) {
	server, secret := benchServer(b)
	var next atomic.Int64
	b.SetParallelism(8)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := strconv.FormatInt(next.Add(1), 10)
			r := httptest.NewRequest(http.MethodPost, "/v1/jobs",
				strings.NewReader(`{"kind":"bench","queue":"bench","args":{"i":`+i+`}}`))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Authorization", "Bearer "+secret)
			r.Header.Set("Idempotency-Key", "new-"+i)
			w := httptest.NewRecorder()
			server.ServeHTTP(w, r)
			if w.Code != http.StatusCreated {
				b.Fatalf("status %d: %s", w.Code, w.Body)
			}
		}
	})
}

// BenchmarkEnqueueHTTP is BenchmarkEnqueueHandler through a real
// 127.0.0.1 listener (net/http's server: reading and parsing requests,
// writing replies) from 16 keep-alive connections that write HTTP/1.1
// requests and parse the replies themselves, as `idem bench-http --client
// raw` does: what one POST /v1/jobs with a new key costs end to end, the
// load generator included. Every reply is checked (201, application/json,
// a Location the body's id matches).
func BenchmarkEnqueueHTTP(b *testing.B) {
	server, secret := benchServer(b)
	ts := httptest.NewServer(server)
	b.Cleanup(ts.Close)
	addr := strings.TrimPrefix(ts.URL, "http://")
	head := "POST /v1/jobs HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nAuthorization: Bearer " +
		secret + "\r\nIdempotency-Key: "
	var next atomic.Int64
	b.SetParallelism(8) // 16 connections on 2 cores
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			b.Error(err)
			return
		}
		defer conn.Close()
		br := bufio.NewReaderSize(conn, 8<<10)
		var req, body []byte
		for pb.Next() {
			i := next.Add(1)
			req = append(req[:0], head...)
			req = strconv.AppendInt(append(req, "new-"...), i, 10)
			n := len(`{"kind":"bench","queue":"bench","args":{"i":}}`) + len(strconv.FormatInt(i, 10))
			req = strconv.AppendInt(append(req, "\r\nContent-Length: "...), int64(n), 10)
			req = strconv.AppendInt(append(req, "\r\n\r\n"+`{"kind":"bench","queue":"bench","args":{"i":`...), i, 10)
			req = append(req, "}}"...)
			if _, err := conn.Write(req); err != nil {
				b.Error(err)
				return
			}
			if body, err = readEnqueueReply(br, body); err != nil {
				b.Errorf("request %d: %v", i, err)
				return
			}
		}
	})
}

// benchServer is the server of the enqueue benchmarks, on a fresh SQLite
// store with durable commits, and the secret of an admin API key of the
// default tenant. No access log, as in `idem bench-http`: a line per
// request would measure the log's writer.
func benchServer(b *testing.B) (*idemhttp.Server, string) {
	b.Helper()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(b.TempDir(), "idem.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	logger := slog.New(slog.DiscardHandler)
	client, err := idem.NewClient(st, &idem.Config{DisableMaintenance: true, Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	server, err := idemhttp.NewServer(client, st, &idemhttp.Config{Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	secret, k := idemhttp.NewAPIKey(idem.DefaultTenant, true, "bench", time.Now())
	if err := st.APIKeyCreate(ctx, k); err != nil {
		b.Fatal(err)
	}
	return server, secret
}

// readEnqueueReply reads one reply from br into body and checks that it
// is a 201 of application/json holding the job its Location names.
func readEnqueueReply(br *bufio.Reader, body []byte) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return body, err
	}
	if !bytes.HasPrefix(line, []byte("HTTP/1.1 201 ")) {
		return body, fmt.Errorf("status line %q", line)
	}
	length, json := -1, false
	var loc []byte
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return body, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, _ := bytes.Cut(line, []byte(": "))
		switch string(name) {
		case "Content-Length":
			if length, err = strconv.Atoi(string(value)); err != nil {
				return body, err
			}
		case "Content-Type":
			json = string(value) == "application/json"
		case "Location":
			loc = append(loc[:0], value...)
		}
	}
	if length < 0 || !json {
		return body, fmt.Errorf("Content-Length %d, JSON %v", length, json)
	}
	body = slices.Grow(body[:0], length)[:length]
	if _, err := io.ReadFull(br, body); err != nil {
		return body, err
	}
	id, ok := bytes.CutPrefix(loc, []byte("/v1/jobs/"))
	if !ok || len(id) == 0 || !bytes.Contains(body, append(append([]byte(`{"job":{"id":"`), id...), '"')) {
		return body, fmt.Errorf("Location %q, body %s", loc, body)
	}
	return body, nil
}
