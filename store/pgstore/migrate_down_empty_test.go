package pgstore

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/internal/dbtest"
)

// TestMigrateDownCreatesNothing: MigrateDown on a schema that does not
// exist, or exists without a migrations table (created by an operator,
// or a misspelt IDEM_PG_SCHEMA of one), rolls back nothing and creates
// nothing: neither the schema nor its migrations table. It created both
// (the migration session's set-up), leaving a schema a later `idem
// migrate status` read as migrated to version 0.
func TestMigrateDownCreatesNothing(t *testing.T) {
	t.Parallel()
	url, schema := dbtest.NewSchema(t)
	s, err := Open(t.Context(), url, &Config{CallerClock: true, Schema: schema, SkipMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := t.Context()
	if err := s.MigrateDown(ctx, 1); err != nil {
		t.Fatalf("down on a schema that does not exist: %v", err)
	}
	if ok, err := s.SchemaExists(ctx); err != nil || ok {
		t.Fatalf("down on a schema that does not exist created it: %v %v", ok, err)
	}
	if _, err := s.pool.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	if err := s.MigrateDown(ctx, 0); err != nil {
		t.Fatalf("down on a schema without a migrations table: %v", err)
	}
	if ok, err := s.migrationsTableExists(ctx); err != nil || ok {
		t.Fatalf("down on a schema without a migrations table created it: %v %v", ok, err)
	}
}
