package webhook

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// setup bundles a sender and a signer for one test.
type senderBundle struct {
	sender *Sender
	signer *Signer
	secret Secret
}

func setup(t *testing.T, cfg *Config) senderBundle {
	t.Helper()
	s, err := NewSender(cfg)
	if err != nil {
		t.Fatalf("new sender: %v", err)
	}
	t.Cleanup(s.Close)
	sec := mustSecret(t, vectorSecret)
	signer, err := NewSigner(sec)
	if err != nil {
		t.Fatal(err)
	}
	return senderBundle{sender: s, signer: signer, secret: sec}
}

// receiver starts a real HTTP server on 127.0.0.1.
func receiver(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func (b senderBundle) push(t *testing.T, url string) Outcome {
	t.Helper()
	return b.sender.Send(t.Context(), &Request{URL: url, ID: "job_1", Body: []byte(`{"n":1}`), Signer: b.signer})
}

func wantClass(t *testing.T, out Outcome, class Class, status int) {
	t.Helper()
	if out.Class != class || out.Status != status {
		t.Fatalf("outcome = %v/%d (err %v), want %v/%d", out.Class, out.Status, out.Err, class, status)
	}
	if (class == ClassCompleted) != (out.Err == nil) {
		t.Fatalf("class %v with err %v", out.Class, out.Err)
	}
}

func TestSenderResponses(t *testing.T) {
	t.Parallel()

	t.Run("verifying receiver completes with its body as result", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		srv := receiver(t, func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			if err := Verify([]Secret{b.secret}, r.Header, body, time.Now(), 0); err != nil {
				http.Error(w, err.Error(), http.StatusUnauthorized)
				return
			}
			_, _ = io.WriteString(w, `{"ok":true}`)
		})
		out := b.push(t, srv.URL)
		wantClass(t, out, ClassCompleted, 200)
		if string(out.Body) != `{"ok":true}` || out.Truncated || out.Latency <= 0 {
			t.Fatalf("body %q truncated %v latency %v", out.Body, out.Truncated, out.Latency)
		}
	})
	t.Run("receiver rejecting a wrong signature makes it dead", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		other := NewSecret([]byte("another-secret-of-32-bytes-long!"))
		srv := receiver(t, func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			if err := Verify([]Secret{other}, r.Header, body, time.Now(), 0); !errors.Is(err, ErrNoMatchingSignature) {
				t.Errorf("receiver Verify = %v, want ErrNoMatchingSignature", err)
			}
			http.Error(w, "bad signature", http.StatusUnauthorized)
		})
		out := b.push(t, srv.URL)
		wantClass(t, out, ClassDead, 401)
		var se *StatusError
		if !errors.As(out.Err, &se) || se.Status != 401 || !strings.Contains(string(out.Body), "bad signature") {
			t.Fatalf("err %v body %q", out.Err, out.Body)
		}
	})
	t.Run("flaky receiver retries then completes", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		var calls atomic.Int32
		srv := receiver(t, func(w http.ResponseWriter, r *http.Request) {
			if calls.Add(1) == 1 {
				http.Error(w, "boom", http.StatusServiceUnavailable)
				return
			}
			_, _ = io.WriteString(w, "done")
		})
		wantClass(t, b.push(t, srv.URL), ClassRetry, 503)
		wantClass(t, b.push(t, srv.URL), ClassCompleted, 200)
	})
	t.Run("429 retries honouring Retry-After seconds", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		srv := receiver(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusTooManyRequests)
		})
		out := b.push(t, srv.URL)
		wantClass(t, out, ClassRetry, 429)
		if out.RetryAfter != 7*time.Second {
			t.Fatalf("RetryAfter = %v", out.RetryAfter)
		}
	})
	t.Run("503 retries honouring a Retry-After date", func(t *testing.T) {
		t.Parallel()
		now := time.Date(2026, 11, 26, 5, 0, 0, 0, time.UTC)
		b := setup(t, &Config{Now: func() time.Time { return now }})
		srv := receiver(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", now.Add(90*time.Second).Format(http.TimeFormat))
			w.WriteHeader(http.StatusServiceUnavailable)
		})
		out := b.push(t, srv.URL)
		wantClass(t, out, ClassRetry, 503)
		if out.RetryAfter != 90*time.Second {
			t.Fatalf("RetryAfter = %v", out.RetryAfter)
		}
	})
	for _, status := range []int{http.StatusGone, http.StatusBadRequest, http.StatusNotFound} {
		t.Run("status "+http.StatusText(status)+" is dead", func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			srv := receiver(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(status) })
			wantClass(t, b.push(t, srv.URL), ClassDead, status)
		})
	}
	t.Run("redirect is not followed and is dead", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		var followed atomic.Bool
		target := receiver(t, func(w http.ResponseWriter, r *http.Request) { followed.Store(true) })
		srv := receiver(t, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL, http.StatusTemporaryRedirect)
		})
		wantClass(t, b.push(t, srv.URL), ClassDead, http.StatusTemporaryRedirect)
		if followed.Load() {
			t.Fatal("redirect was followed")
		}
	})
	t.Run("redirect is followed when configured", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &Config{FollowRedirects: true})
		srv := receiver(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/there" {
				_, _ = io.WriteString(w, "there")
				return
			}
			http.Redirect(w, r, "/there", http.StatusTemporaryRedirect)
		})
		out := b.push(t, srv.URL)
		wantClass(t, out, ClassCompleted, 200)
		if string(out.Body) != "there" {
			t.Fatalf("body %q", out.Body)
		}
	})
	// A 301, 302 or 303 makes net/http repeat a POST as a GET without
	// its body: the push would "complete" on whatever the new URL answers
	// to a GET, and the webhook would never have been delivered.
	for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther} {
		t.Run("followed redirect never turns the push into a GET "+strconv.Itoa(status), func(t *testing.T) {
			t.Parallel()
			b := setup(t, &Config{FollowRedirects: true})
			var got atomic.Value // the method and body the redirect's target received
			target := receiver(t, func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				got.Store(r.Method + " " + string(body))
				_, _ = io.WriteString(w, "a page")
			})
			srv := receiver(t, func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, target.URL, status)
			})
			out := b.push(t, srv.URL)
			if g, _ := got.Load().(string); g != "" && g != `POST {"n":1}` {
				t.Errorf("the redirect's target received %q, want the POST or nothing", g)
			}
			if out.Class == ClassCompleted && got.Load() != `POST {"n":1}` {
				t.Fatalf("push completed (%d %q) though the webhook was not delivered", out.Status, out.Body)
			}
			wantClass(t, out, ClassDead, status)
		})
	}
	t.Run("followed 308 redirect keeps the POST and its body", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &Config{FollowRedirects: true})
		var got atomic.Value
		srv := receiver(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/moved" {
				http.Redirect(w, r, "/moved", http.StatusPermanentRedirect)
				return
			}
			body, _ := io.ReadAll(r.Body)
			if err := Verify([]Secret{b.secret}, r.Header, body, time.Now(), 0); err != nil {
				http.Error(w, err.Error(), http.StatusUnauthorized)
				return
			}
			got.Store(r.Method + " " + string(body))
		})
		wantClass(t, b.push(t, srv.URL), ClassCompleted, 200)
		if got.Load() != `POST {"n":1}` {
			t.Fatalf("the redirect's target received %v", got.Load())
		}
	})
	t.Run("body is read up to the limit", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &Config{MaxBodyBytes: 10})
		srv := receiver(t, func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, strings.Repeat("x", 1<<20))
		})
		out := b.push(t, srv.URL)
		wantClass(t, out, ClassCompleted, 200)
		if len(out.Body) != 10 || !out.Truncated {
			t.Fatalf("body %d bytes, truncated %v", len(out.Body), out.Truncated)
		}
	})
	t.Run("slow receiver times out and retries", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		stop := make(chan struct{})
		srv := receiver(t, func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-stop:
			case <-r.Context().Done():
			}
		})
		t.Cleanup(func() { close(stop) }) // runs before srv.Close
		out := b.sender.Send(t.Context(), &Request{URL: srv.URL, Body: []byte("{}"), Timeout: 50 * time.Millisecond})
		wantClass(t, out, ClassRetry, 0)
		if !errors.Is(out.Err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want deadline exceeded", out.Err)
		}
	})
	t.Run("connection refused retries", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		wantClass(t, b.push(t, url), ClassRetry, 0)
	})
	t.Run("signed request without an id is dead", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		out := b.sender.Send(t.Context(), &Request{URL: "http://127.0.0.1:1/", Body: []byte("{}"), Signer: b.signer})
		if out.Class != ClassDead || out.Err == nil {
			t.Fatalf("%v %v", out.Class, out.Err)
		}
	})
	t.Run("invalid url is dead", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		for _, u := range []string{"ftp://example.com/", "/relative", "http://"} {
			if out := b.push(t, u); out.Class != ClassDead || !errors.Is(out.Err, ErrInvalidURL) {
				t.Fatalf("%q: %v %v", u, out.Class, out.Err)
			}
		}
	})
}

func TestSenderSlowTargetDoesNotStallOthers(t *testing.T) {
	t.Parallel()
	b := setup(t, &Config{MaxPerTarget: 1, SlotWait: -1})
	entered, release := make(chan struct{}), make(chan struct{})
	slow := receiver(t, func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	fast := receiver(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "fast") })

	slowDone := make(chan Outcome, 1)
	go func() { slowDone <- b.push(t, slow.URL) }()
	<-entered // the slow target's only slot is now held

	wantClass(t, b.push(t, fast.URL), ClassCompleted, 200)
	busy := b.push(t, slow.URL)
	if busy.Class != ClassRetry || !errors.Is(busy.Err, ErrTargetBusy) {
		t.Fatalf("second push to the saturated target: %v %v", busy.Class, busy.Err)
	}
	close(release)
	wantClass(t, <-slowDone, ClassCompleted, 200)
}

// flipResolver answers each lookup of a host with the next address in its
// list, as a DNS server rebinding a name would.
type flipResolver struct {
	answers []netip.Addr
	calls   atomic.Int32
}

func (f *flipResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	i := int(f.calls.Add(1)) - 1
	return []netip.Addr{f.answers[min(i, len(f.answers)-1)]}, nil
}

func TestSenderAddressPolicy(t *testing.T) {
	t.Parallel()
	ok := func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }

	t.Run("metadata and link-local literals are refused", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		for _, u := range []string{"http://169.254.169.254/latest/meta-data/", "http://[fd00:ec2::254]/", "http://[fe80::1%25lo]:80/", "http://100.100.100.200/", "http://[::ffff:169.254.169.254]/"} {
			out := b.push(t, u)
			if out.Class != ClassDead || !errors.Is(out.Err, ErrForbiddenAddress) {
				t.Fatalf("%s: %v %v", u, out.Class, out.Err)
			}
		}
	})
	t.Run("a redirect to the metadata address is not followed", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &Config{FollowRedirects: true})
		srv := receiver(t, func(w http.ResponseWriter, r *http.Request) {
			// 307: a redirect that keeps the POST (a 302 is not followed:
			// it would turn the push into a GET), but to another origin.
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusTemporaryRedirect)
		})
		wantClass(t, b.push(t, srv.URL), ClassDead, http.StatusTemporaryRedirect)
	})
	t.Run("a followed redirect whose host now resolves to the metadata address is refused", func(t *testing.T) {
		t.Parallel()
		res := &flipResolver{answers: []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("169.254.169.254")}}
		b := setup(t, &Config{FollowRedirects: true, Resolver: res})
		srv := receiver(t, func(w http.ResponseWriter, r *http.Request) {
			// Within the origin, on a new connection: its host is
			// resolved again, and the answer checked at connect.
			w.Header().Set("Connection", "close")
			http.Redirect(w, r, "/meta-data/", http.StatusTemporaryRedirect)
		})
		out := b.push(t, strings.Replace(srv.URL, "127.0.0.1", "rebind.test", 1))
		if out.Class != ClassDead || !errors.Is(out.Err, ErrForbiddenAddress) || res.calls.Load() != 2 {
			t.Fatalf("%v %v after %d lookups", out.Class, out.Err, res.calls.Load())
		}
	})
	t.Run("loopback is allowed by default", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		wantClass(t, b.push(t, receiver(t, ok).URL), ClassCompleted, 200)
	})
	t.Run("DenyPrivate refuses loopback", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &Config{DenyPrivate: true})
		out := b.push(t, receiver(t, ok).URL)
		if out.Class != ClassDead || !errors.Is(out.Err, ErrForbiddenAddress) {
			t.Fatalf("%v %v", out.Class, out.Err)
		}
	})
	t.Run("Allow overrides DenyPrivate", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &Config{DenyPrivate: true, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
		wantClass(t, b.push(t, receiver(t, ok).URL), ClassCompleted, 200)
	})
	t.Run("a name resolving to a receiver is pushed to", func(t *testing.T) {
		t.Parallel()
		res := &flipResolver{answers: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}
		b := setup(t, &Config{Resolver: res})
		srv := receiver(t, ok)
		url := strings.Replace(srv.URL, "127.0.0.1", "receiver.test", 1)
		if err := b.sender.CheckURL(t.Context(), url); err != nil {
			t.Fatalf("CheckURL: %v", err)
		}
		wantClass(t, b.push(t, url), ClassCompleted, 200)
	})
	t.Run("a DNS answer changed after CheckURL is refused at connect", func(t *testing.T) {
		t.Parallel()
		res := &flipResolver{answers: []netip.Addr{netip.MustParseAddr("203.0.113.7"), netip.MustParseAddr("169.254.169.254")}}
		b := setup(t, &Config{Resolver: res})
		url := "http://rebind.test/hook"
		if err := b.sender.CheckURL(t.Context(), url); err != nil {
			t.Fatalf("CheckURL with the first answer: %v", err)
		}
		out := b.push(t, url)
		if out.Class != ClassDead || !errors.Is(out.Err, ErrForbiddenAddress) || res.calls.Load() != 2 {
			t.Fatalf("%v %v after %d lookups", out.Class, out.Err, res.calls.Load())
		}
	})
	t.Run("CheckURL refuses a forbidden answer", func(t *testing.T) {
		t.Parallel()
		res := &flipResolver{answers: []netip.Addr{netip.MustParseAddr("fe80::1")}}
		b := setup(t, &Config{Resolver: res})
		if err := b.sender.CheckURL(t.Context(), "https://x.test/"); !errors.Is(err, ErrForbiddenAddress) {
			t.Fatalf("CheckURL = %v", err)
		}
	})
}

func TestAddrPolicy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr        string
		denyPrivate bool
		allow       string
		forbidden   bool
	}{
		{"169.254.169.254", false, "", true},
		{"::ffff:169.254.169.254", false, "", true},
		{"64:ff9b::a9fe:a9fe", false, "", true},
		{"fe80::1", false, "", true},
		{"fd00:ec2::254", false, "", true},
		{"169.254.169.254", false, "169.254.169.254/32", false},
		{"127.0.0.1", false, "", false},
		{"127.0.0.1", true, "", true},
		{"::1", true, "", true},
		{"10.1.2.3", true, "", true},
		{"172.16.0.1", true, "", true},
		{"192.168.1.1", true, "", true},
		{"fd12::1", true, "", true},
		{"0.0.0.0", true, "", true},
		{"100.64.0.1", true, "", true},
		{"10.1.2.3", true, "10.0.0.0/8", false},
		{"203.0.113.7", true, "", false},
		{"2001:db8::1", true, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			t.Parallel()
			p := addrPolicy{denyPrivate: tt.denyPrivate}
			if tt.allow != "" {
				p.allow = []netip.Prefix{netip.MustParsePrefix(tt.allow)}
			}
			err := p.check(netip.MustParseAddr(tt.addr))
			if errors.Is(err, ErrForbiddenAddress) != tt.forbidden {
				t.Fatalf("check(%s) = %v, want forbidden %v", tt.addr, err, tt.forbidden)
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 26, 5, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0}, {"0", 0}, {"-5", 0}, {"30", 30 * time.Second}, {" 2 ", 2 * time.Second},
		{"99999999999999", maxRetryAfter}, {"soon", 0},
		{now.Add(time.Minute).Format(http.TimeFormat), time.Minute},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
	}
	for _, tt := range tests {
		if got := parseRetryAfter(tt.in, now); got != tt.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestClassifyStatus(t *testing.T) {
	t.Parallel()
	tests := map[int]Class{200: ClassCompleted, 204: ClassCompleted, 301: ClassDead, 400: ClassDead, 401: ClassDead,
		408: ClassRetry, 410: ClassDead, 422: ClassDead, 429: ClassRetry, 500: ClassRetry, 502: ClassRetry, 503: ClassRetry}
	for status, want := range tests {
		if got := classifyStatus(status); got != want {
			t.Errorf("classifyStatus(%d) = %v, want %v", status, got, want)
		}
	}
}
