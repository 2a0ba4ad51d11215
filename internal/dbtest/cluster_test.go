package dbtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestThrowawayCluster starts the fallback cluster for real and queries it.
func TestThrowawayCluster(t *testing.T) {
	if _, err := findPGBin("initdb"); err != nil {
		t.Skip("PostgreSQL server binaries are not installed: ", err)
	}
	url, stop, err := startThrowaway()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1: %d %v", one, err)
	}
}
