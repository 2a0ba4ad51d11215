package pgstore

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// IsUnavailable implements store.FailureClassifier: the database cannot be
// reached (connection refused, reset or closed), is shutting down or
// refusing connections, or lacks resources (disk full, out of memory), or
// is read-only (a standby).
func (s *Store) IsUnavailable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false // the caller's own deadline, not the database
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"), // connection exception
			strings.HasPrefix(pgErr.Code, "53"),                                 // insufficient resources (disk full)
			pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03", // shutdown, cannot connect now
			pgErr.Code == "25006": // read-only transaction
			return true
		}
		return false
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	var opErr *net.OpError
	return errors.As(err, &connErr) || errors.As(err, &netErr) || errors.As(err, &opErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || pgconn.SafeToRetry(err) ||
		strings.Contains(err.Error(), "conn closed")
}

// IsRefused implements store.RefusalClassifier: PostgreSQL refused the
// statement for the data it holds (class 22, data exception: bytes that are
// not UTF-8 or a NUL byte in text, invalid JSON, a value out of range;
// class 54, program limit exceeded: a value too large). Retrying the same
// data fails again.
func (s *Store) IsRefused(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (strings.HasPrefix(pgErr.Code, "22") || strings.HasPrefix(pgErr.Code, "54"))
}
