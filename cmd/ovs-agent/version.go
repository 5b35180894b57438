package main

import (
	"runtime/debug"
	"strings"
)

// version is set at build time: go build -ldflags "-X main.version=1.2.3".
// Unset, the version comes from the module's build information.
var version = ""

// versionString is what --version prints (oslo.config prints the bare
// version, so does ovs-agent): the -ldflags version, else the module
// version, else "devel" with the VCS revision the binary was built from.
func versionString() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	var b strings.Builder
	b.WriteString("devel")
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		b.WriteString("+" + rev)
		if modified == "true" {
			b.WriteString(".dirty")
		}
	}
	return b.String()
}
