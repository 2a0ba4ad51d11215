package cli

import (
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestBoolFlagsShowNoValue checks that no boolean flag's help shows a value
// placeholder: pflag takes a back-quoted word of the usage text as the
// placeholder, so "run `idem migrate`" printed "--no-migrate idem migrate".
func TestBoolFlagsShowNoValue(t *testing.T) {
	t.Parallel()
	var walk func(c *cobra.Command)
	checked := 0
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if f.Value.Type() != "bool" {
				return
			}
			checked++
			if name, _ := pflag.UnquoteUsage(f); name != "" {
				t.Errorf("%s --%s: help shows the placeholder %q for a boolean flag", c.CommandPath(), f.Name, name)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot(strings.NewReader(""), io.Discard, io.Discard))
	if checked == 0 {
		t.Fatal("no boolean flags found: the walk reads nothing")
	}
}
