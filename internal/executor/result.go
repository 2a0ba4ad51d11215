package executor

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
)

// EncodedResult is a result as stored in an idempotency record.
type EncodedResult struct {
	Bytes      []byte
	Compressed bool
	Hash       string // hex SHA-256 of the uncompressed result
}

// EncodeResult compresses results above threshold bytes (threshold < 0:
// never) and hashes the original.
func EncodeResult(res []byte, threshold int) (EncodedResult, error) {
	sum := sha256.Sum256(res)
	e := EncodedResult{Bytes: res, Hash: hex.EncodeToString(sum[:])}
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
		e.Bytes, e.Compressed = buf.Bytes(), true
	}
	return e, nil
}

// DecodeResult returns the original bytes of a stored result.
func DecodeResult(b []byte, compressed bool) ([]byte, error) {
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
