package cli

import (
	"context"
	"errors"

	"github.com/idem-dev/idem/store"
)

// openPostgres opens the PostgreSQL store.
func openPostgres(ctx context.Context, url string) (store.Store, error) {
	return nil, errors.New("the PostgreSQL store is not wired into the CLI yet")
}
