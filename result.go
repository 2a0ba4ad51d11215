package idem

import "github.com/idem-dev/idem/internal/executor"

// encodedResult is a result as stored in an idempotency record (the codec
// lives in internal/executor; Do uses these names).
type encodedResult struct {
	bytes      []byte
	compressed bool
	hash       string // hex SHA-256 of the uncompressed result
}

// encodeResult compresses results above threshold bytes (threshold < 0:
// never) and hashes the original.
func encodeResult(res []byte, threshold int) (encodedResult, error) {
	e, err := executor.EncodeResult(res, threshold)
	return encodedResult{bytes: e.Bytes, compressed: e.Compressed, hash: e.Hash}, err
}

// decodeResult returns the original bytes of a stored result.
func decodeResult(b []byte, compressed bool) ([]byte, error) {
	return executor.DecodeResult(b, compressed)
}
