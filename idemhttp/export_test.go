package idemhttp

import "testing"

// MetricsStoreReads returns how many times /metrics read the store.
func MetricsStoreReads(s *Server) int {
	s.storeMetrics.mu.Lock()
	defer s.storeMetrics.mu.Unlock()
	return s.storeMetrics.queries
}

// InitClaimSignal arms the signal of long-polling claims; call it before
// the first request.
func InitClaimSignal(s *Server) { s.claimWaiting.Init() }

// WaitClaim waits until a long-polling claim is in flight.
func WaitClaim(t testing.TB, s *Server) { s.claimWaiting.WaitOrTimeout(t) }

// BatchItemKey is batchItemKey: the key of a batch item without its own.
func BatchItemKey(k string, i int) string { return batchItemKey(k, i) }

// RouteKinds maps each route ("METHOD /path") to how it is served: "ops"
// (no key, OpsHandler), "public" (an API route without a key), "keyed"
// (behind the Idempotency-Key middleware) or "api".
func RouteKinds(s *Server) map[string]string {
	out := make(map[string]string, len(s.routes))
	for _, rt := range s.routes {
		kind := "api"
		switch {
		case rt.ops:
			kind = "ops"
		case rt.public:
			kind = "public"
		case rt.idempotent || rt.lease || rt.claim || rt.job:
			kind = "keyed"
		}
		out[rt.method+" "+rt.path] = kind
	}
	return out
}

// RouteQuery maps each route ("METHOD /path") to the query parameters it
// takes.
func RouteQuery(s *Server) map[string][]string {
	out := make(map[string][]string, len(s.routes))
	for _, rt := range s.routes {
		out[rt.method+" "+rt.path] = rt.query
	}
	return out
}

// RouteAnyQuery lists the routes ("METHOD /path") that do not check their
// query (probes, scrapes, the document).
func RouteAnyQuery(s *Server) map[string]bool {
	out := map[string]bool{}
	for _, rt := range s.routes {
		if rt.anyQuery {
			out[rt.method+" "+rt.path] = true
		}
	}
	return out
}
