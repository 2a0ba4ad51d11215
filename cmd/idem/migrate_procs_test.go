package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/idem-dev/idem/internal/dbtest"
)

// TestConcurrentMigrateProcesses: four `idem migrate --json` processes
// started at once on one new database (a SQLite file they create, a new
// PostgreSQL schema) all exit 0, and between them report every version
// applied exactly once, as docs/operations.md promises ("safe from several
// hosts at once"); a fifth run afterwards applies none.
func TestConcurrentMigrateProcesses(t *testing.T) {
	bin := buildIdem(t)
	pgURL, schema := dbtest.NewSchema(t)
	for _, c := range []struct {
		name string
		db   string
		env  []string
	}{
		{"sqlite", filepath.Join(t.TempDir(), "idem.db"), nil},
		{"postgres", pgURL, []string{"IDEM_PG_SCHEMA=" + schema}},
	} {
		t.Run(c.name, func(t *testing.T) {
			type result struct {
				From    int   `json:"from_version"`
				To      int   `json:"to_version"`
				Applied []int `json:"applied"`
			}
			migrate := func() *exec.Cmd {
				cmd := exec.Command(bin, "migrate", "--json", "--create", "--database", c.db)
				cmd.Env = append(os.Environ(), c.env...)
				return cmd
			}
			cmds := make([]*exec.Cmd, 4)
			outs := make([]*bytes.Buffer, len(cmds))
			errs := make([]*bytes.Buffer, len(cmds))
			for i := range cmds {
				cmds[i] = migrate()
				outs[i], errs[i] = &bytes.Buffer{}, &bytes.Buffer{}
				cmds[i].Stdout, cmds[i].Stderr = outs[i], errs[i]
				if err := cmds[i].Start(); err != nil {
					t.Fatal(err)
				}
			}
			var applied []int
			to := -1
			for i, cmd := range cmds {
				if err := cmd.Wait(); err != nil {
					t.Errorf("process %d: %v\nstdout %q\nstderr %q", i, err, outs[i], errs[i])
					continue
				}
				var r result
				if err := json.Unmarshal(outs[i].Bytes(), &r); err != nil {
					t.Errorf("process %d: %v in %q", i, err, outs[i])
					continue
				}
				if to >= 0 && r.To != to {
					t.Errorf("process %d reports version %d, another %d", i, r.To, to)
				}
				to = r.To
				applied = append(applied, r.Applied...)
			}
			if t.Failed() {
				return
			}
			slices.Sort(applied)
			if len(applied) == 0 || applied[len(applied)-1] != to || len(slices.Compact(slices.Clone(applied))) != len(applied) {
				t.Fatalf("the processes applied %v between them, want every version to %d once", applied, to)
			}
			out, err := migrate().Output()
			var r result
			if err != nil || json.Unmarshal(out, &r) != nil || len(r.Applied) != 0 || r.To != to {
				t.Fatalf("a later run: %v %q, want nothing applied at %d", err, out, to)
			}
		})
	}
}
