package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/store"
)

// Store signals available jobs with LISTEN/NOTIFY.
var _ store.Listener = (*Store)(nil)

// maxListenDelay caps the reconnect backoff of Listen.
const maxListenDelay = 30 * time.Second

// Listen subscribes to the schema's notification channel on a dedicated
// connection and returns the queues that got available jobs, one value per
// notification (duplicates within a transaction are merged by PostgreSQL).
// When the connection fails it reconnects with backoff; notifications sent
// meanwhile are lost, so callers keep polling as the fallback. After every
// reconnect it sends "" (meaning "any queue may have jobs"). The channel is
// closed when ctx ends. The first connection is made before Listen returns.
func (s *Store) Listen(ctx context.Context) (<-chan string, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	conn, err := s.listenConn(ctx)
	if err != nil {
		return nil, err
	}
	out := make(chan string, 64)
	go s.listenLoop(ctx, conn, out)
	return out, nil
}

// listenConn opens a connection outside the pool and LISTENs on it.
func (s *Store) listenConn(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, `LISTEN "`+s.schema+`"`); err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	return conn, nil
}

// listenLoop forwards notifications until ctx ends, reconnecting as needed.
func (s *Store) listenLoop(ctx context.Context, conn *pgx.Conn, out chan<- string) {
	defer close(out)
	delay := s.reconnect
	for {
		n, err := conn.WaitForNotification(ctx)
		if err == nil {
			delay = s.reconnect
			select {
			case out <- n.Payload:
			case <-ctx.Done():
				conn.Close(context.Background())
				return
			}
			continue
		}
		conn.Close(context.Background())
		for {
			if ctx.Err() != nil {
				return
			}
			s.logger.Warn("pgstore: listen connection lost; reconnecting", "err", err, "delay", delay)
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			delay = min(delay*2, maxListenDelay)
			if conn, err = s.listenConn(ctx); err == nil {
				break
			}
		}
		select {
		case out <- "":
		case <-ctx.Done():
			conn.Close(context.Background())
			return
		}
	}
}
