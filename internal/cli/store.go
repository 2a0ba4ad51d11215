package cli

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// resolveDatabase returns the URL to use: the flag, else the environment,
// else the default SQLite file.
func resolveDatabase(flag string) string {
	if flag != "" {
		return flag
	}
	if env := os.Getenv(envDatabaseURL); env != "" {
		return env
	}
	return defaultDB
}

// isPostgres reports whether url names a PostgreSQL database.
func isPostgres(url string) bool {
	return strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://")
}

// openStore opens (and migrates) the store named by url.
func openStore(ctx context.Context, url string) (store.Store, error) {
	if isPostgres(url) {
		return openPostgres(ctx, url)
	}
	path := strings.TrimPrefix(strings.TrimPrefix(url, "sqlite://"), "sqlite:")
	st, err := sqlitestore.Open(ctx, path, nil)
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	return st, nil
}
