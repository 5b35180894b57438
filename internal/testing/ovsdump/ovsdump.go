// Package ovsdump reads what ovs-vsctl prints, for the golden tests that compare this
// repository's decisions with a reference agent's captured host (docs/reference/captures*,
// the packages' testdata): `ovs-vsctl list` records and their map columns.
//
// It is a plain package so that tests of several packages share one parser; only tests
// import it. Everything here is pure: callers read the files.
package ovsdump

import (
	"regexp"
	"strconv"
	"strings"
)

// Records parses `ovs-vsctl list` output (with or without --columns): one map per record,
// column -> value as printed, both trimmed. A line without ':' (the blank line between
// records) ends a record.
func Records(s string) []map[string]string {
	var out []map[string]string
	var cur map[string]string
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			cur = nil
			continue
		}
		if cur == nil {
			cur = map[string]string{}
			out = append(out, cur)
		}
		cur[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out
}

var mapKV = regexp.MustCompile(`([A-Za-z0-9_.:-]+)=("(?:[^"\\]|\\.)*"|[^,}]*)`)

// Map parses an OVSDB map column as ovs-vsctl prints it ({a=b, c="d \"e\""}); quoted
// values are unquoted. An empty map ({}) or a non-map value gives an empty map.
func Map(s string) map[string]string {
	out := map[string]string{}
	for _, m := range mapKV.FindAllStringSubmatch(s, -1) {
		v := m[2]
		if strings.HasPrefix(v, `"`) {
			if u, err := strconv.Unquote(v); err == nil {
				v = u
			}
		}
		out[m[1]] = v
	}
	return out
}
