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
