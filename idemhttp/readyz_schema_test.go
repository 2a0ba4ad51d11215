package idemhttp_test

import (
	"context"
	"strings"
	"testing"

	"github.com/idem-dev/idem/idemhttp"
)

// TestReadyzSchemaAdvice: /readyz's schema check says what to do for
// each direction. A schema behind the binary: run `idem migrate`. A
// schema ahead of it (a newer binary migrated, this node was not
// upgraded, or was rolled back): `idem migrate` with this binary applies
// nothing, so that advice would be wrong; the detail says the schema is
// newer and to run the newer binary.
func TestReadyzSchemaAdvice(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		applied, expected int
		want, not         string
	}{
		{3, 5, "schema version 3, this binary expects 5: run `idem migrate`", "newer"},
		{26, 25, "schema version 26 is newer than this binary's 25", "run `idem migrate`"},
	} {
		e := setup(t, openSQLite, &setupOpts{serverCfg: &idemhttp.Config{SchemaVersion: func(context.Context) (int, int, error) {
			return c.applied, c.expected, nil
		}}})
		r := e.req("GET", "/readyz", "", nil)
		expect(t, r, 503, "")
		schema, _ := r.json(t)["checks"].(map[string]any)["schema"].(map[string]any)
		detail, _ := schema["detail"].(string)
		if !strings.Contains(detail, c.want) || strings.Contains(detail, c.not) {
			t.Errorf("applied %d, expected %d: detail %q, want %q without %q", c.applied, c.expected, detail, c.want, c.not)
		}
	}
}
