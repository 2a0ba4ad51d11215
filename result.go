package idem

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
)

// encodedResult is a result as stored in an idempotency record.
type encodedResult struct {
	bytes      []byte
	compressed bool
	hash       string // hex SHA-256 of the uncompressed result
}

// encodeResult compresses results above threshold bytes (threshold < 0:
// never) and hashes the original.
func encodeResult(res []byte, threshold int) (encodedResult, error) {
	sum := sha256.Sum256(res)
	e := encodedResult{bytes: res, hash: hex.EncodeToString(sum[:])}
	if threshold < 0 || len(res) <= threshold {
		return e, nil
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(res); err != nil {
		return e, fmt.Errorf("compress result: %w", err)
	}
	if err := zw.Close(); err != nil {
		return e, fmt.Errorf("compress result: %w", err)
	}
	if buf.Len() < len(res) {
		e.bytes, e.compressed = buf.Bytes(), true
	}
	return e, nil
}

// decodeResult returns the original bytes of a stored result.
func decodeResult(b []byte, compressed bool) ([]byte, error) {
	if !compressed {
		return b, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("decompress result: %w", err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("decompress result: %w", err)
	}
	return out, nil
}
