package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestQuick runs the whole comparison with --quick. It skips when
// PostgreSQL is not reachable (this module is not part of the root
// `go test ./...`).
func TestQuick(t *testing.T) {
	t.Parallel()
	o := defaultOptions()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	conn, err := pgx.Connect(ctx, o.URL)
	cancel()
	if err != nil {
		t.Skipf("PostgreSQL not reachable at %s: %v", o.URL, err)
	}
	_ = conn.Close(context.Background())

	o.Quick = true
	var out bytes.Buffer
	if err := run(t.Context(), o, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	table := out.String()
	t.Log("\n" + table)
	for _, want := range []string{
		"| scenario | idem | River | ratio (idem/River) |",
		"single insert, 16 goroutines (jobs/s)", "single insert, 16 goroutines, keys p99",
		"vs InsertManyFast/COPY", "work 5,000 no-op, 100 workers, keys",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if n := strings.Count("\n"+table, "\n| "); n != 1+12 {
		t.Errorf("table has %d rows, want header and 12:\n%s", n, table)
	}
}

func TestOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{nil, true},
		{[]string{"--scenarios", "work", "--keys", "on"}, true},
		{[]string{"--scenarios", "nope"}, false},
		{[]string{"--keys", "maybe"}, false},
		{[]string{"--batch-size", "1001"}, false},
	} {
		o := defaultOptions()
		fs := newFlagSet(o)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if err := o.finish(); (err == nil) != tc.ok {
			t.Errorf("%v: finish() = %v, want ok=%v", tc.args, err, tc.ok)
		}
	}
}
