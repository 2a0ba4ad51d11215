// Package recordlease runs a piece of work at most once per idempotency
// record: it acquires the execution lease of a record key, renews it while
// the work runs, stores the result or releases the key on failure. It is
// the one implementation behind idem.Client.Do and the Idempotency-Key
// middleware of idemhttp, over the store's record methods.
//
// It also owns the namespaces of record keys (Key): job keys, middleware
// keys, Do keys and schedule firings share the records table but never
// a stored key.
package recordlease
