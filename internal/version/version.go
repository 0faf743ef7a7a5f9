// Package version holds build information stamped in by the linker.
package version

import "runtime/debug"

// Set with -ldflags "-X github.com/charter-dev/charter/internal/version.Version=...".
var (
	Version = "dev"
	Commit  = ""
)

// Info describes the running binary.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	GoVersion string `json:"goVersion"`
}

// Get returns the build information, falling back to the VCS data the Go
// toolchain records when the linker flags were not set.
func Get() Info {
	info := Info{Version: Version, Commit: Commit}
	if bi, ok := debug.ReadBuildInfo(); ok {
		info.GoVersion = bi.GoVersion
		if info.Commit == "" {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" {
					info.Commit = s.Value
				}
			}
		}
	}
	return info
}
