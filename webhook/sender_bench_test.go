package webhook

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// BenchmarkSendSigned signs and pushes a small payload to local receivers
// that answer 200, spread over 1 and 10 targets, 8 pushes in flight per core.
func BenchmarkSendSigned(b *testing.B) {
	for _, targets := range []int{1, 10} {
		b.Run(fmt.Sprintf("targets=%d", targets), func(b *testing.B) {
			urls := make([]string, targets)
			for i := range urls {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					_, _ = io.Copy(io.Discard, r.Body)
					_, _ = io.WriteString(w, `{"ok":true}`)
				}))
				b.Cleanup(srv.Close)
				urls[i] = srv.URL
			}
			s, err := NewSender(&Config{MaxPerTarget: 64})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(s.Close)
			signer, err := NewSigner(NewSecret([]byte("0123456789abcdef0123456789abcdef")))
			if err != nil {
				b.Fatal(err)
			}
			body := []byte(`{"job_id":42,"kind":"order.shipped","args":{"order":42},"attempt":1}`)
			var next atomic.Uint64
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					url := urls[next.Add(1)%uint64(targets)]
					if out := s.Send(b.Context(), &Request{URL: url, ID: "job_42", Body: body, Signer: signer}); out.Class != ClassCompleted {
						b.Errorf("push: %v %v", out.Class, out.Err)
						return
					}
				}
			})
		})
	}
}
