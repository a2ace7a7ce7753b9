// Package version holds the version and commit stamped into the binary by
// the linker:
//
//	go build -ldflags "-X github.com/steward-evals/steward/internal/version.Version=v1.2.3 \
//	  -X github.com/steward-evals/steward/internal/version.Commit=abc1234"
//
// Unstamped builds fall back to the module's build info.
package version

import "runtime/debug"

// Set by the linker (-X).
var (
	Version = ""
	Commit  = ""
)

// readBuildInfo is debug.ReadBuildInfo (a variable for tests).
var readBuildInfo = debug.ReadBuildInfo

// Get returns the version ("dev" when unknown) and the commit ("" when
// unknown, shortened to 12 characters).
func Get() (version, commit string) {
	version, commit = Version, Commit
	if commit == "unknown" {
		commit = ""
	}
	if bi, ok := readBuildInfo(); ok {
		if version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			version = bi.Main.Version
		}
		if commit == "" {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" {
					commit = s.Value
				}
			}
		}
	}
	if version == "" {
		version = "dev"
	}
	if len(commit) > 12 {
		commit = commit[:12]
	}
	return version, commit
}

// String is "v1.2.3 (abc1234)", or the version alone when the commit is unknown.
func String() string {
	v, c := Get()
	if c == "" {
		return v
	}
	return v + " (" + c + ")"
}
