package key

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

// edgeCase is one case of testdata/canonical-edges.json.
type edgeCase struct {
	Name      string `json:"name"`
	Input     string `json:"input"`
	InputHex  string `json:"input_hex"`
	Nest      int    `json:"nest"`
	Canonical string `json:"canonical"`
	Error     bool   `json:"error"`
}

// input returns the case's JSON text and the canonical form it expects.
func (c *edgeCase) input(t *testing.T) (in []byte, want string) {
	t.Helper()
	switch {
	case c.InputHex != "":
		b, err := hex.DecodeString(c.InputHex)
		if err != nil {
			t.Fatalf("input_hex: %v", err)
		}
		return b, c.Canonical
	case c.Nest > 0:
		s := strings.Repeat("[", c.Nest) + strings.Repeat("]", c.Nest)
		return []byte(s), s
	}
	return []byte(c.Input), c.Canonical
}

// TestCanonicalEdges pins the edge cases the clients (TypeScript, PHP)
// reproduce: what Canonicalize refuses (duplicate names, lone surrogates,
// out-of-range numbers, invalid UTF-8, nesting beyond maxDepth) and what it
// keeps (names with U+0000, underflows as 0), so the file is Go's answer.
func TestCanonicalEdges(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("testdata/canonical-edges.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Cases []edgeCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Cases) < 30 {
		t.Fatalf("%d cases", len(file.Cases))
	}
	for _, c := range file.Cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			in, want := c.input(t)
			got, err := Canonicalize(in)
			checkErr := Check(in, 0)
			switch {
			case c.Error && !errors.Is(err, ErrInvalidJSON):
				t.Fatalf("Canonicalize = %q, %v; want ErrInvalidJSON", got, err)
			case c.Error && !errors.Is(checkErr, ErrInvalidJSON):
				t.Fatalf("Check = %v; want ErrInvalidJSON", checkErr)
			case !c.Error && (err != nil || string(got) != want):
				t.Fatalf("Canonicalize = %q, %v; want %q", got, err, want)
			case !c.Error && checkErr != nil:
				t.Fatalf("Check = %v; want nil", checkErr)
			}
		})
	}
}
