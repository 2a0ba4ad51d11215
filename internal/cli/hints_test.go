package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestLocalFileErrorsHaveNoServerHint: a missing local file (a batch file,
// a SQLite directory) is not hinted as an unreachable server: a
// syscall.Errno satisfies net.Error, so every file error once got "is
// `idem serve` running there?".
func TestLocalFileErrorsHaveNoServerHint(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "nope", "x")
	for _, args := range [][]string{
		{"batch", "create", "--key", "k", "--file", missing + ".json", "--url", "http://127.0.0.1:1"},
		{"migrate", "--database", missing + ".db"},
	} {
		_, errs, code := run(t, args...)
		if code == ExitOK || strings.Contains(errs, "idem serve") {
			t.Errorf("%v: exit %d, stderr %q: want an error without a server hint", args, code, errs)
		}
	}
	// A server that cannot be reached keeps its hint.
	_, errs, _ := run(t, "jobs", "get", "1", "--url", "http://127.0.0.1:1")
	if !strings.Contains(errs, "is `idem serve` running there?") {
		t.Errorf("an unreachable server: stderr %q lacks the hint", errs)
	}
}
