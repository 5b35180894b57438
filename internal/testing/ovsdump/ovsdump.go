// Package ovsdump reads what ovs-vsctl and ovs-ofctl print, for the golden tests that
// compare this repository's decisions with a reference agent's captured host
// (docs/reference/captures*, the packages' testdata): `ovs-vsctl list` records and their
// map columns, `ovs-ofctl show` port numbers, and dump-flows lines with the run-specific
// parts (cookies) dropped, sorted and diffed as multisets.
//
// It is a plain package so that tests of several packages share one parser; only tests
// import it. Everything here is pure: callers read the files.
package ovsdump

import (
	"regexp"
	"sort"
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

var showPort = regexp.MustCompile(`^\s*(\d+)\(([^)]+)\):`)

// OfctlPorts maps port name -> ofport from `ovs-ofctl show` output (LOCAL is not a number
// and is left out).
func OfctlPorts(s string) map[string]uint32 {
	out := map[string]uint32{}
	for _, l := range strings.Split(s, "\n") {
		if m := showPort.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			out[m[2]] = uint32(n)
		}
	}
	return out
}

var (
	cookieField = regexp.MustCompile(`cookie=(0x[0-9a-f]+), `)
	cookieValue = regexp.MustCompile(`cookie=0x[0-9a-f]+`)
	tableField  = regexp.MustCompile(`table=(\d+),`)
)

// DropCookie removes a dump-flows line's "cookie=0x…, " field: the reference agent's
// cookies are random per run (and per bridge and extension).
func DropCookie(l string) string { return cookieField.ReplaceAllString(l, "") }

// MaskCookie replaces every cookie=0x… (the flow's and a learn action's) with cookie=C,
// keeping the field's place in the line.
func MaskCookie(l string) string { return cookieValue.ReplaceAllString(l, "cookie=C") }

// Cookie is the line's cookie ("0x…"), ok false when it has none.
func Cookie(l string) (cookie string, ok bool) {
	m := cookieField.FindStringSubmatch(l)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// Table is the first "table=N," of the line; dump-flows omits table=0, so ok is false
// for table 0's lines.
func Table(l string) (table uint8, ok bool) {
	m := tableField.FindStringSubmatch(l)
	if m == nil {
		return 0, false
	}
	n, _ := strconv.Atoi(m[1])
	return uint8(n), true
}

// Lines returns the dump's non-blank lines that keep accepts (nil keeps all), each passed
// through norm (nil: unchanged), sorted.
func Lines(dump string, keep func(string) bool, norm func(string) string) []string {
	var out []string
	for _, l := range strings.Split(dump, "\n") {
		if strings.TrimSpace(l) == "" || (keep != nil && !keep(l)) {
			continue
		}
		if norm != nil {
			l = norm(l)
		}
		out = append(out, l)
	}
	sort.Strings(out)
	return out
}

// Diff compares two line multisets: missing are want's lines got lacks (sorted), extra
// are got's lines want lacks (in got's order), each as often as it is short or over.
func Diff(want, got []string) (missing, extra []string) {
	w := map[string]int{}
	for _, l := range want {
		w[l]++
	}
	for _, l := range got {
		if w[l] > 0 {
			w[l]--
			continue
		}
		extra = append(extra, l)
	}
	for l, n := range w {
		for ; n > 0; n-- {
			missing = append(missing, l)
		}
	}
	sort.Strings(missing)
	return missing, extra
}
