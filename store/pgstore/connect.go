package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Connect opens one connection to url (a PostgreSQL URL or DSN) outside
// any Store, with Open's guards: a URL whose user info holds an unescaped
// '@' is refused before connecting (write it as %40), and no error quotes
// the password or a piece of it. It is for tools that run statements of
// their own beside a store, such as idem's bench commands.
func Connect(ctx context.Context, url string) (*pgx.Conn, error) {
	if err := checkUserinfo(url); err != nil {
		return nil, err
	}
	conn, err := pgx.Connect(ctx, url)
	return conn, hidePassword(err, url)
}
