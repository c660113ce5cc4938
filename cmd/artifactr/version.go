package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/artifactr/artifactr/events"
)

// version is set at link time: -ldflags "-X main.version=v1.2.3". A
// `go install ...@vX` build has none, and takes the module's version.
var version = "dev"

// buildVersion is what version and --version print.
func buildVersion() versionJSON {
	v := versionJSON{Version: version, Schema: events.SchemaVersion, Go: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if v.Version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v.Revision = s.Value[:12]
		}
	}
	return v
}

// String is the version line.
func (v versionJSON) String() string {
	rev := ""
	if v.Revision != "" {
		rev = " (" + v.Revision + ")"
	}
	return fmt.Sprintf("artifactr %s%s, event schema v%s, %s", v.Version, rev, v.Schema, v.Go)
}

func (a *app) versionCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Long: `Print artifactr's version, its VCS revision when known, the event schema
version and the Go version ('artifactr --version' prints the same line).

--json prints one object instead: {"version","revision","schema","go"}.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			v := buildVersion()
			if asJSON {
				return writeJSON(a.stdout, v)
			}
			fmt.Fprintln(a.stdout, v)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}
