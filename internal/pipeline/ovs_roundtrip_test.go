//go:build integration

package pipeline

import (
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	of "github.com/ovsagent/ovsagent/internal/openflow"
	"github.com/ovsagent/ovsagent/internal/testing/ovsdump"
	"github.com/ovsagent/ovsagent/internal/testing/ovstest"
)

// TestOVSRoundTrip installs every flow the pipeline computes, for states that
// exercise every feature (l2pop, ARP responder, tunnels of three types,
// VLAN/flat, anti-spoofing, egress direct, OVS firewall entry, dead ports),
// into a private Open vSwitch and checks that `ovs-ofctl dump-flows` prints
// back exactly the lines we render: the switch accepts every flow and nothing
// is rewritten. It also checks that the reference's ofctl spellings
// (mod_vlan_vid, strip_vlan) install as the flows we compute.
func TestOVSRoundTrip(t *testing.T) {
	o := ovstest.Start(t)
	for _, br := range []string{"br-int", "br-tun", "br-phys"} {
		if err := o.AddBridge(br); err != nil {
			t.Fatal(err)
		}
	}
	states := map[string]*State{
		"ovsfw-l2pop-arp": rtState(Config{FirewallDriver: FirewallOpenvSwitch, EnableSecurityGroup: true,
			L2Population: true, ARPResponder: true, TunnelTypes: []NetworkType{TypeVXLAN, TypeGRE, TypeGeneve}}),
		"noop-egress-direct": rtState(Config{FirewallDriver: FirewallNoop, ExplicitlyEgressDirect: true,
			TunnelTypes: []NetworkType{TypeVXLAN, TypeGRE, TypeGeneve}}),
	}
	for name, s := range states {
		t.Run(name, func(t *testing.T) {
			d := Compute(s)
			for br := range d {
				want := renderRaw(bridgeFlows(d, br))
				if _, err := o.Ofctl("del-flows", br); err != nil {
					t.Fatal(err)
				}
				got := installAndDump(t, o, br, want)
				t.Logf("%s: %d flows installed, %d dumped", br, len(want), len(got))
				if len(want) == 0 {
					t.Errorf("%s: nothing computed", br)
				}
				missing, extra := ovsdump.Diff(want, got)
				for _, l := range missing {
					t.Errorf("%s: rendered but not dumped back:\n%s", br, l)
				}
				for _, l := range extra {
					t.Errorf("%s: dumped but not rendered:\n%s", br, l)
				}
			}
		})
	}

	// The reference installs egress-direct flows through ovs-ofctl text.
	t.Run("reference-spellings", func(t *testing.T) {
		s, p := portState(Config{FirewallDriver: FirewallNoop, ExplicitlyEgressDirect: true})
		p.PortSecurity = false
		if _, err := o.Ofctl("del-flows", "br-int"); err != nil {
			t.Fatal(err)
		}
		ref := []string{
			"table=62,priority=10,dl_src=fa:16:3e:fa:95:0c,dl_dst=00:00:00:00:00:00/01:00:00:00:00:00,in_port=5,actions=mod_vlan_vid:2,output:1",
			"table=61,priority=12,dl_vlan=2,dl_dst=fa:16:3e:fa:95:0c,actions=strip_vlan,output:5",
			"table=61,priority=12,reg6=2,dl_dst=fa:16:3e:fa:95:0c,actions=output:5",
			"table=60,priority=9,in_port=5,dl_src=fa:16:3e:fa:95:0c,actions=set_field:2->reg6,resubmit(,61)",
		}
		got := installAndDump(t, o, "br-int", ref)
		bf, _ := FlowsFor(s, OwnerPort(p.ID))
		want := renderRaw(bf["br-int"])
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("reference spellings install as\n%s\nwe compute\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

func installAndDump(t *testing.T, o *ovstest.OVS, br string, lines []string) []string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "flows.txt")
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(strings.TrimSpace(l))
		b.WriteByte('\n')
	}
	if err := os.WriteFile(f, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := o.Ofctl("add-flows", br, f); err != nil {
		t.Fatalf("add-flows %s: %v\n%s\n%s", br, err, out, b.String())
	}
	out, err := o.Ofctl("dump-flows", br, "--no-stats")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "OFPST_FLOW") {
			continue
		}
		got = append(got, l)
	}
	sort.Strings(got)
	return got
}

func renderRaw(flows []of.Flow) []string {
	out := make([]string, 0, len(flows))
	for _, f := range flows {
		out = append(out, f.String())
	}
	sort.Strings(out)
	return out
}

// rtState is the benchmark fixture, cut to 40 ports, plus what it lacks.
func rtState(cfg Config) *State {
	s := benchState(40, cfg)
	// Tunnels of the other two types, a gre and a geneve network, a dead and
	// an admin-down port, a port without port security, one with AAPs.
	for i, tt := range []NetworkType{TypeGRE, TypeGeneve} {
		ip := netip.AddrFrom4([4]byte{10, 0, 2, byte(i + 1)})
		s.Tunnels[TunnelKey{ip, tt}] = &Tunnel{RemoteIP: ip, Type: tt, Ofport: uint32(200 + i)}
		k := Seg("tt-"+string(tt), uint32(5000+i))
		s.Networks[k] = &Network{Key: k, Type: tt, LocalVLAN: uint16(300 + i), FDB: map[netip.Addr]*RemoteFDB{
			ip: {Flood: true, Entries: []FDBEntry{{MAC: mac("fa:16:3e:99:00:0" + string(rune('1'+i))), IP: netip.AddrFrom4([4]byte{172, 16, byte(i), 5})}}},
		}}
	}
	i := 0
	for _, p := range s.Ports {
		switch i {
		case 0:
			p.Dead = true
		case 1:
			p.AdminUp = false
		case 2:
			p.PortSecurity = false
		case 3:
			p.AllowedAddressPairs = []AddressPair{{MAC: mac("fa:16:3e:77:77:77"), IP: pfx("10.250.0.0/16")}, {IP: pfx("fd00::/64")}}
			p.FixedIPs = append(p.FixedIPs, pfx("fd00::77"))
		}
		i++
	}
	s.Int.Cookie, s.Tun.Cookie = 0x6610498854de8082, 0x19ee3019de756556
	for _, pb := range s.Phys {
		pb.Cookie = 0x3f8d0e88eb79c38e
	}
	return s
}
