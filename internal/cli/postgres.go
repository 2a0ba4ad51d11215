package cli

import (
	"context"
	"fmt"
	"os"

	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/pgstore"
)

// envSchema names the PostgreSQL schema of idem's tables.
const envSchema = "IDEM_PG_SCHEMA"

// openPostgres opens (and migrates) the PostgreSQL store; the schema comes
// from IDEM_PG_SCHEMA (default "idem").
func openPostgres(ctx context.Context, url string) (store.Store, error) {
	return openPostgresWith(ctx, url, false)
}

func openPostgresWith(ctx context.Context, url string, skipMigrate bool) (*pgstore.Store, error) {
	st, err := pgstore.Open(ctx, url, &pgstore.Config{Schema: os.Getenv(envSchema), SkipMigrate: skipMigrate})
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	return st, nil
}
