package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
)

// benchConn is one keep-alive HTTP/1.1 connection of `idem bench-http
// --client raw`: it writes POST /v1/jobs requests and parses the replies
// itself, reusing its buffers, so that the load generator spends little of
// the CPU it shares with the server. It speaks plain HTTP/1.1 over TCP and
// reads the whole of every reply (Content-Length or chunked); a reply with
// Connection: close makes it dial again.
type benchConn struct {
	addr           string
	head           []byte // the request's fixed lines, up to the Idempotency-Key value
	conn           net.Conn
	br             *bufio.Reader
	req, hdr, body []byte // reused buffers: request, header values, reply body
	stop           func() bool
}

// dialBench connects to the server of base (http://host:port).
func dialBench(ctx context.Context, base, apiKey string) (*benchConn, error) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("--client raw needs an http://host:port URL, not %q", base)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	head := "POST " + strings.TrimSuffix(u.EscapedPath(), "/") + "/v1/jobs HTTP/1.1\r\nHost: " + u.Host +
		"\r\nUser-Agent: idem-bench-http\r\nContent-Type: application/json\r\nAuthorization: Bearer " + apiKey +
		"\r\nIdempotency-Key: "
	c := &benchConn{addr: addr, head: []byte(head)}
	if err := c.dial(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *benchConn) dial(ctx context.Context) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return fmt.Errorf("dial %s: %w", c.addr, err)
	}
	c.conn = conn
	if c.br == nil {
		c.br = bufio.NewReaderSize(conn, 16<<10)
	} else {
		c.br.Reset(conn)
	}
	// A cancelled run closes the connection, which ends a blocked read.
	c.stop = context.AfterFunc(ctx, func() { conn.Close() })
	return nil
}

func (c *benchConn) close() {
	if c.conn != nil {
		c.stop()
		c.conn.Close()
		c.conn = nil
	}
}

// send writes one request in one write and reads its reply.
func (c *benchConn) send(ctx context.Context, key, body []byte) (benchReply, error) {
	c.req = append(append(c.req[:0], c.head...), key...)
	c.req = append(append(c.req, "\r\nContent-Length: "...), strconv.Itoa(len(body))...)
	c.req = append(append(c.req, "\r\n\r\n"...), body...)
	if _, err := c.conn.Write(c.req); err != nil {
		return benchReply{}, fmt.Errorf("write: %w", err)
	}
	rep, closing, err := c.read()
	if err != nil {
		return benchReply{}, err
	}
	if closing {
		c.close()
		if err := c.dial(ctx); err != nil {
			return benchReply{}, err
		}
	}
	return rep, nil
}

// read parses one reply: status line, headers, body.
func (c *benchConn) read() (rep benchReply, closing bool, err error) {
	line, err := c.line()
	if err != nil {
		return rep, false, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) || (len(line) > 12 && line[12] != ' ') {
		return rep, false, fmt.Errorf("malformed status line %q", line)
	}
	if rep.status, err = strconv.Atoi(string(line[9:12])); err != nil || rep.status < 100 {
		return rep, false, fmt.Errorf("malformed status line %q", line)
	}
	length, chunked := -1, false
	// The header values are copied: the reader's buffer moves on.
	hdr := c.hdr[:0]
	var ct, loc [2]int
	for {
		line, err := c.line()
		if err != nil {
			return rep, false, err
		}
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return rep, false, fmt.Errorf("malformed header line %q", line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil || length < 0 {
				return rep, false, fmt.Errorf("malformed Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
		case bytes.EqualFold(name, []byte("Connection")):
			closing = bytes.EqualFold(value, []byte("close"))
		case bytes.EqualFold(name, []byte("Content-Type")):
			ct = [2]int{len(hdr), len(hdr) + len(value)}
			hdr = append(hdr, value...)
		case bytes.EqualFold(name, []byte("Location")):
			loc = [2]int{len(hdr), len(hdr) + len(value)}
			hdr = append(hdr, value...)
		}
	}
	c.hdr = hdr
	rep.contentType, rep.location = hdr[ct[0]:ct[1]], hdr[loc[0]:loc[1]]
	switch {
	case chunked:
		c.body = c.body[:0]
		buf := bytes.NewBuffer(c.body)
		if _, err := buf.ReadFrom(httputil.NewChunkedReader(c.br)); err != nil {
			return rep, false, fmt.Errorf("read chunked body: %w", err)
		}
		// The trailer section ends with an empty line.
		for {
			line, err := c.line()
			if err != nil {
				return rep, false, err
			}
			if len(line) == 0 {
				break
			}
		}
		c.body = buf.Bytes()
	case length >= 0:
		if cap(c.body) < length {
			c.body = make([]byte, length)
		}
		c.body = c.body[:length]
		if _, err := io.ReadFull(c.br, c.body); err != nil {
			return rep, false, fmt.Errorf("read body: %w", err)
		}
	case closing:
		// The body ends with the connection (net/http's own 400 replies).
		buf := bytes.NewBuffer(c.body[:0])
		if _, err := buf.ReadFrom(c.br); err != nil {
			return rep, false, fmt.Errorf("read body: %w", err)
		}
		c.body = buf.Bytes()
	default:
		return rep, false, fmt.Errorf("status %d: a reply without Content-Length, chunked encoding or Connection: close", rep.status)
	}
	rep.body = c.body
	return rep, closing, nil
}

// line returns the next CRLF-terminated line without its CRLF; it is valid
// until the next read.
func (c *benchConn) line() ([]byte, error) {
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, errors.New("header line too long")
		}
		return nil, fmt.Errorf("read reply: %w", err)
	}
	return bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r")), nil
}
