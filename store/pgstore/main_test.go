package pgstore

import (
	"flag"
	"os"
	"testing"
)

// TestMain runs the package's parallel tests four at a time unless
// -parallel was given: they wait on round trips to PostgreSQL far more
// than they compute (under -race the test process used about 1.5 minutes
// of CPU in 9 minutes), so the default of GOMAXPROCS (2 on the CI
// machine) left the cores idle. Four keeps the connections well within a
// default max_connections of 100.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", "4"); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
