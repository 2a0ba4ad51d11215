package idemhttp

// MetricsStoreReads returns how many times /metrics read the store.
func MetricsStoreReads(s *Server) int {
	s.storeMetrics.mu.Lock()
	defer s.storeMetrics.mu.Unlock()
	return s.storeMetrics.queries
}
