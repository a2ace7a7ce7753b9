package version

import (
	"runtime/debug"
	"testing"
)

func TestGet(t *testing.T) {
	defer func(v, c string, r func() (*debug.BuildInfo, bool)) { Version, Commit, readBuildInfo = v, c, r }(Version, Commit, readBuildInfo)
	info := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "fedcba9876543210fedcba"}}}
	readBuildInfo = func() (*debug.BuildInfo, bool) { return info, true }
	for _, tc := range []struct{ v, c, want string }{
		{"v1.2.3", "0123456789abcdef", "v1.2.3 (0123456789ab)"}, // stamped
		{"", "", "dev (fedcba987654)"},                          // from build info
		{"v2.0.0", "unknown", "v2.0.0 (fedcba987654)"},
	} {
		Version, Commit = tc.v, tc.c
		if got := String(); got != tc.want {
			t.Errorf("Version=%q Commit=%q: %q, want %q", tc.v, tc.c, got, tc.want)
		}
	}
	readBuildInfo = func() (*debug.BuildInfo, bool) { return nil, false }
	Version, Commit = "", ""
	if got := String(); got != "dev" {
		t.Errorf("no stamp, no build info: %q", got)
	}
}
