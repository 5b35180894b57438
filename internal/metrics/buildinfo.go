package metrics

import (
	"runtime"
	"runtime/debug"
)

// buildInfo is what ovsagent_build_info says about the binary.
type buildInfo struct{ version, goversion, revision string }

// readBuildInfo reads the module version and VCS revision the Go toolchain
// stamped into the binary ("unknown" where it stamped none: a build outside
// a git checkout, -buildvcs=false, a test binary).
func readBuildInfo() buildInfo {
	b := buildInfo{version: "unknown", goversion: runtime.Version(), revision: "unknown"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	if v := bi.Main.Version; v != "" {
		b.version = v
	}
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified && b.revision != "unknown" {
		// built from a tree with uncommitted changes: not quite that commit
		b.revision += "-dirty"
	}
	return b
}

// buildInfoFamily is ovsagent_build_info: constant 1, the build in its
// labels, as Prometheus' own *_build_info metrics (join on it to see which
// hosts run which build).
func buildInfoFamily(b buildInfo) family {
	const name = "ovsagent_build_info"
	return family{name, "A metric with a constant '1' value labeled by the version, the Go version and the VCS revision ovs-agent was built from.", "gauge",
		func(out []byte) []byte {
			out = append(out, name+`{goversion="`...)
			out = appendEscaped(out, b.goversion, true)
			out = append(out, `",revision="`...)
			out = appendEscaped(out, b.revision, true)
			out = append(out, `",version="`...)
			out = appendEscaped(out, b.version, true)
			return append(out, "\"} 1\n"...)
		}}
}
