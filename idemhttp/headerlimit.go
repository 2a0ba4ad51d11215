package idemhttp

import (
	"fmt"
	"math"
	"net/http"
)

// ProblemHeadersTooLarge is the 431 of a request whose request line and
// headers pass Config.MaxHeaderBytes.
const ProblemHeadersTooLarge = "/problems/request-headers-too-large"

// hardHeaderBytes is the http.Server.MaxHeaderBytes NewHTTPServer sets for
// a Config.MaxHeaderBytes of n: a quarter more, so that requests a little
// over n reach the handler chain, which answers them a 431 problem
// (limitHeaders); net/http answers anything past its own limit (this plus
// its 4 KiB read slack) with a text/plain 431 before any handler runs. The
// margin stays small: a connection's header buffer grows up to it.
func hardHeaderBytes(n int) int {
	if n > math.MaxInt-n/4 {
		return n
	}
	return n + n/4
}

// headerBytes counts the request line and headers of r as net/http reads
// them off the wire: "METHOD URI PROTO\r\n", "Name: value\r\n" per value
// (Host included, which net/http moves to r.Host) and the blank line. It
// stops counting once past limit.
func headerBytes(r *http.Request, limit int) int {
	n := len(r.Method) + 1 + len(r.RequestURI) + 1 + len(r.Proto) + 2 + 2
	if _, ok := r.Header["Host"]; !ok && r.Host != "" {
		n += len("Host: ") + len(r.Host) + 2
	}
	for name, values := range r.Header {
		for _, v := range values {
			n += len(name) + 2 + len(v) + 2
			if n > limit {
				return n
			}
		}
	}
	return n
}

// limitHeaders answers a request whose request line and headers pass
// Config.MaxHeaderBytes with a 431 problem, before anything else reads it.
func (s *Server) limitHeaders(next http.Handler) http.Handler {
	limit := s.cfg.MaxHeaderBytes
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if headerBytes(r, limit) > limit {
			w.Header().Set("Connection", "close") // as net/http's own 431
			writeProblem(w, newProblem(http.StatusRequestHeaderFieldsTooLarge, ProblemHeadersTooLarge,
				"Request headers too large",
				fmt.Sprintf("the request line and headers are over %d bytes", limit)))
			return
		}
		next.ServeHTTP(w, r)
	})
}
