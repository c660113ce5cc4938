package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/artifactr/artifactr/events"
)

// version is set at link time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Long:  "Print artifactr's version, its VCS revision when known, the event schema version and the Go version.",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			rev := ""
			if bi, ok := debug.ReadBuildInfo(); ok {
				for _, s := range bi.Settings {
					if s.Key == "vcs.revision" && len(s.Value) >= 12 {
						rev = " (" + s.Value[:12] + ")"
					}
				}
			}
			fmt.Fprintf(a.stdout, "artifactr %s%s, event schema v%s, %s\n", version, rev, events.SchemaVersion, runtime.Version())
			return nil
		},
	}
}
