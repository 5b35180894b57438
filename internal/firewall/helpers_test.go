package firewall

import (
	"net"
	"net/netip"
	"sort"
	"strings"
	"testing"

	of "github.com/ovsagent/ovsagent/internal/openflow"
	"github.com/ovsagent/ovsagent/internal/testing/ovsdump"
)

func ip(s string) netip.Addr    { return netip.MustParseAddr(s) }
func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func iptr(v int) *int           { return &v }
func mac(s string) net.HardwareAddr {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}

// lines renders flows as dump-flows lines without the cookie, sorted.
func lines(fs []of.Flow) []string {
	out := make([]string, 0, len(fs))
	for _, f := range fs {
		out = append(out, normaliseLine(f.String()))
	}
	sort.Strings(out)
	return out
}

// only keeps lines of the given tables.
func only(ls []string, tables ...string) []string {
	var out []string
	for _, l := range ls {
		for _, t := range tables {
			if strings.HasPrefix(l, "table="+t+",") {
				out = append(out, l)
			}
		}
	}
	return out
}

func expectLines(t *testing.T, got, want []string) {
	t.Helper()
	want = append([]string(nil), want...)
	sort.Strings(want)
	missing, extra := ovsdump.Diff(want, got)
	for _, l := range missing {
		t.Errorf("missing: %s", l)
	}
	for _, l := range extra {
		t.Errorf("extra:   %s", l)
	}
}

const (
	sgA = "aaaaaaaa-0000-0000-0000-000000000000"
	sgB = "bbbbbbbb-0000-0000-0000-000000000000"
	agX = "cccccccc-0000-0000-0000-000000000000"
)

// onePort is a state with one filtered port (ofport 7, VLAN 5) in group g.
func onePort(g SecurityGroup, mut ...func(*Port)) *State {
	p := Port{ID: "p1", OFPort: 7, VLAN: 5, MAC: mac("fa:16:3e:00:00:01"), FixedIPs: []netip.Addr{ip("10.0.0.5")}, PortSecurity: true, SecurityGroupIDs: []string{g.ID}}
	for _, m := range mut {
		m(&p)
	}
	return &State{Ports: map[string]Port{p.ID: p}, Groups: map[string]SecurityGroup{g.ID: g}, Members: map[string][]Member{}}
}

func computeLines(st *State) []string {
	ids := AssignConjIDs(ConjIDs{}, NeededConjKeys(st))
	var all []of.Flow
	for _, fs := range Compute(st, ids) {
		all = append(all, fs...)
	}
	return lines(all)
}
