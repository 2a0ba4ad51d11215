package webhook

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestSenderFollowedRedirectLeadingNowhere: with FollowRedirects, a 307
// that cannot be followed — to a scheme other than http(s), one more of a
// chain longer than ten, or one whose Location is unparsable, empty or
// without a host — is dead with its 3xx status, as a 3xx that is not
// followed is: before the fix the first two, then the unparsable
// Location, were a transport error of class retry, so a receiver's
// misconfigured redirect was pushed again on every attempt of the job.
func TestSenderFollowedRedirectLeadingNowhere(t *testing.T) {
	t.Parallel()
	for name, location := range map[string]string{
		"to another scheme":       "ftp://127.0.0.1/hooks",
		"in a loop":               "/again",
		"an unparsable Location":  "http://%zz/hooks",
		"a bad port":              "http://127.0.0.1:port/hooks",
		"an empty Location":       "",
		"a Location without host": "http:///hooks",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, &Config{FollowRedirects: true})
			srv := receiver(t, func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Location", location)
				w.WriteHeader(http.StatusTemporaryRedirect)
			})
			wantClass(t, b.push(t, srv.URL), ClassDead, http.StatusTemporaryRedirect)
		})
	}
}

// seenHeaders records, for a receiver, the requests it got and the
// webhook or secret-bearing headers among them.
type seenHeaders struct {
	requests atomic.Int32
	leaked   atomic.Value // string: the first such header seen
}

// sensitive are the headers a push carries that prove or hold a secret.
var sensitive = []string{HeaderSignature, HeaderID, HeaderTimestamp, "Authorization", "X-Api-Key"}

func (s *seenHeaders) record(r *http.Request) {
	s.requests.Add(1)
	for _, h := range sensitive {
		if r.Header.Get(h) != "" {
			s.leaked.CompareAndSwap(nil, h)
		}
	}
}

// pushWithHeaders is a signed push carrying an Authorization and an API
// key header as well.
func (b senderBundle) pushWithHeaders(t *testing.T, url string) Outcome {
	t.Helper()
	h := http.Header{"Authorization": {"Bearer s3cret"}, "X-Api-Key": {"k3y"}}
	return b.sender.Send(t.Context(), &Request{URL: url, ID: "job_1", Body: []byte(`{"n":1}`), Signer: b.signer, Header: h})
}

// TestSenderRedirectStaysOnOrigin: a followed redirect is followed only
// on the origin (scheme, host and port) of the target's URL. A 307 or 308
// to another origin — another server on 127.0.0.1, or from https to http
// — is dead with its status and the other server receives nothing: before
// the fix it received the push with its webhook-signature, webhook-id,
// webhook-timestamp and the caller's other headers (net/http strips only
// Authorization and cookies, and only for another host name), over plain
// HTTP after a downgrade, and the push counted against the first origin's
// concurrency cap only, so the other origin got more pushes at once than
// its cap. A redirect within the origin is followed, signed.
func TestSenderRedirectStaysOnOrigin(t *testing.T) {
	t.Parallel()
	t.Run("to another server", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &Config{FollowRedirects: true})
		var other seenHeaders
		dst := receiver(t, func(w http.ResponseWriter, r *http.Request) { other.record(r) })
		for _, status := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
			src := receiver(t, func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, dst.URL+"/hook", status) })
			out := b.pushWithHeaders(t, src.URL)
			if n, h := other.requests.Load(), other.leaked.Load(); n != 0 || h != nil {
				t.Fatalf("%d: the other server got %d requests, carrying %v", status, n, h)
			}
			wantClass(t, out, ClassDead, status)
		}
	})
	t.Run("from https to http", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &Config{FollowRedirects: true})
		var plain seenHeaders
		dst := receiver(t, func(w http.ResponseWriter, r *http.Request) { plain.record(r) })
		src := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, dst.URL+"/hook", http.StatusPermanentRedirect)
		}))
		t.Cleanup(src.Close)
		trustServer(t, b.sender, src)
		out := b.pushWithHeaders(t, src.URL)
		if n, h := plain.requests.Load(), plain.leaked.Load(); n != 0 || h != nil {
			t.Fatalf("the http server got %d requests, carrying %v", n, h)
		}
		wantClass(t, out, ClassDead, http.StatusPermanentRedirect)
	})
	t.Run("within the origin, signed", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &Config{FollowRedirects: true})
		var got atomic.Value
		var srv *httptest.Server
		srv = receiver(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/v2" {
				http.Redirect(w, r, srv.URL+"/v2", http.StatusPermanentRedirect)
				return
			}
			body, _ := io.ReadAll(r.Body)
			if err := Verify([]Secret{b.secret}, r.Header, body, time.Now(), 0); err != nil {
				http.Error(w, err.Error(), http.StatusUnauthorized)
				return
			}
			got.Store(r.Method + " " + string(body) + " " + r.Header.Get("X-Api-Key"))
			_, _ = io.WriteString(w, "moved")
		})
		out := b.pushWithHeaders(t, srv.URL+"/v1")
		wantClass(t, out, ClassCompleted, 200)
		if got.Load() != `POST {"n":1} k3y` || string(out.Body) != "moved" {
			t.Fatalf("the redirect's target received %v, answered %q", got.Load(), out.Body)
		}
	})
	t.Run("the target URL's credentials on every hop", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &Config{FollowRedirects: true})
		var got atomic.Value
		srv := receiver(t, func(w http.ResponseWriter, r *http.Request) {
			user, pass, _ := r.BasicAuth()
			if r.URL.Path != "/b" {
				http.Redirect(w, r, "/b", http.StatusTemporaryRedirect)
				return
			}
			got.Store(user + ":" + pass)
		})
		wantClass(t, b.push(t, strings.Replace(srv.URL, "http://", "http://user:pw@", 1)+"/a"), ClassCompleted, 200)
		if got.Load() != "user:pw" {
			t.Fatalf("the redirect's target got basic auth %v", got.Load())
		}
	})
	t.Run("never past another origin's cap", func(t *testing.T) {
		t.Parallel()
		b := setup(t, &Config{FollowRedirects: true, MaxPerTarget: 1, SlotWait: -1})
		entered, release := make(chan struct{}, 2), make(chan struct{})
		dst := receiver(t, func(w http.ResponseWriter, r *http.Request) {
			entered <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
			}
		})
		src := receiver(t, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, dst.URL, http.StatusTemporaryRedirect)
		})
		direct, redirected := make(chan Outcome, 1), make(chan Outcome, 1)
		go func() { direct <- b.push(t, dst.URL) }()
		<-entered // the direct push holds dst's only slot
		go func() { redirected <- b.push(t, src.URL) }()
		select {
		case out := <-redirected:
			close(release)
			wantClass(t, <-direct, ClassCompleted, 200)
			wantClass(t, out, ClassDead, http.StatusTemporaryRedirect)
		case <-entered:
			close(release)
			<-direct
			<-redirected
			t.Fatal("the redirected push reached a target of cap 1 while another push held its slot")
		}
	})
}

// trustServer makes s trust the certificate of the TLS server srv.
func trustServer(t *testing.T, s *Sender, srv *httptest.Server) {
	t.Helper()
	tr := s.transport
	pool := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if !strings.HasPrefix(srv.URL, "https://") {
		t.Fatalf("not a TLS server: %s", srv.URL)
	}
}
