package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// buildInfo is what `idem version` reports, read from the binary's build
// information (runtime/debug): the module version (set by `go install
// …@vX`), the VCS revision and time (set by `go build` in a checkout).
type buildInfo struct {
	Module    string `json:"module"`
	Version   string `json:"version"`
	Revision  string `json:"revision,omitempty"`
	Time      string `json:"time,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"go_version"`
}

func readBuildInfo() buildInfo {
	b := buildInfo{Module: "github.com/idem-dev/idem", Version: "(devel)", GoVersion: runtime.Version()}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	if info.Main.Path != "" {
		b.Module = info.Main.Path
	}
	if info.Main.Version != "" {
		b.Version = info.Main.Version
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// versionString is the one-line version of --version and the startup log.
func versionString() string {
	b := readBuildInfo()
	s := "idem " + b.Version
	if b.Revision != "" {
		rev := b.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		s += " (" + rev
		if b.Modified {
			s += "+dirty"
		}
		s += ")"
	}
	return s + " " + b.GoVersion
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{Use: "version", Short: "Print the version, VCS revision and Go version", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if wantJSON(cmd) {
				return printJSON(cmd.OutOrStdout(), readBuildInfo())
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), versionString())
			return err
		}}
}
