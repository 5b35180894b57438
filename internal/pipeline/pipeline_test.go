package pipeline

import (
	"net"
	"net/netip"
	"sort"
	"strings"
	"testing"

	of "github.com/ovsagent/ovsagent/internal/openflow"
	"github.com/ovsagent/ovsagent/internal/testing/ovsdump"
)

// Unit golden tables. Cookies are left zero so the rendered lines carry none.

func mac(s string) net.HardwareAddr {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}

func pfx(s string) netip.Prefix {
	if !strings.Contains(s, "/") {
		a := netip.MustParseAddr(s)
		return netip.PrefixFrom(a, a.BitLen())
	}
	return netip.MustParsePrefix(s)
}

func lines(fs []of.Flow) []string {
	out := make([]string, 0, len(fs))
	for _, f := range fs {
		out = append(out, strings.TrimSpace(f.String()))
	}
	sort.Strings(out)
	return out
}

func wantLines(ls ...string) []string {
	out := append([]string(nil), ls...)
	sort.Strings(out)
	return out
}

func ownerFlows(t *testing.T, s *State, owner, bridge string) []string {
	t.Helper()
	bf, err := FlowsFor(s, owner)
	if err != nil {
		t.Fatal(err)
	}
	return lines(bf[bridge])
}

func eqLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") == strings.Join(want, "\n") {
		return
	}
	missing, extra := ovsdump.Diff(want, got)
	t.Errorf("%s:\n  missing: %s\n  extra:   %s", what, strings.Join(missing, "\n           "), strings.Join(extra, "\n           "))
}

// tunState: vxlan network seg 100 on local VLAN 1; tunnels to 10.0.0.2
// (ofport 5), 10.0.0.3 (ofport 7) and a gre tunnel to 10.0.0.4 (ofport 9).
func tunState(cfg Config) (*State, NetKey) {
	s := NewState(cfg)
	s.Int.PatchTunOfport = 2
	s.Tun = &TunBridge{Name: "br-tun", PatchIntOfport: 1}
	k := Seg("net-a", 100)
	s.Networks[k] = &Network{Key: k, Type: TypeVXLAN, LocalVLAN: 1, FDB: map[netip.Addr]*RemoteFDB{}}
	for _, tn := range []Tunnel{
		{netip.MustParseAddr("10.0.0.2"), TypeVXLAN, 5},
		{netip.MustParseAddr("10.0.0.3"), TypeVXLAN, 7},
		{netip.MustParseAddr("10.0.0.4"), TypeGRE, 9},
	} {
		tn := tn
		s.Tunnels[tn.Key()] = &tn
	}
	return s, k
}

func TestL2popFlooding(t *testing.T) {
	cfg := Config{L2Population: true, TunnelTypes: []NetworkType{TypeVXLAN, TypeGRE}}
	s, k := tunState(cfg)
	n := s.Networks[k]
	ip2, ip3 := netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3")
	tunnelFlow := "table=4, priority=1,tun_id=0x64 actions=push_vlan:0x8100,set_field:4097->vlan_vid,goto_table:10"

	steps := []struct {
		name string
		do   func()
		want []string
	}{
		{"no fdb: no flood flow", func() {}, wantLines(tunnelFlow)},
		{"add flooding entry from 10.0.0.3", func() { n.FDB[ip3] = &RemoteFDB{Flood: true} },
			wantLines(tunnelFlow, "table=22, priority=1,dl_vlan=1 actions=pop_vlan,set_field:0x64->tun_id,output:7")},
		{"add flooding entry from 10.0.0.2", func() { n.FDB[ip2] = &RemoteFDB{Flood: true} },
			wantLines(tunnelFlow, "table=22, priority=1,dl_vlan=1 actions=pop_vlan,set_field:0x64->tun_id,output:5,output:7")},
		{"remove flooding entry of 10.0.0.3", func() { n.FDB[ip3].Flood = false },
			wantLines(tunnelFlow, "table=22, priority=1,dl_vlan=1 actions=pop_vlan,set_field:0x64->tun_id,output:5")},
		{"remove the last flooding entry", func() { delete(n.FDB, ip2) }, wantLines(tunnelFlow)},
	}
	for _, st := range steps {
		st.do()
		eqLines(t, st.name, ownerFlows(t, s, OwnerNetwork(k), "br-tun"), st.want)
	}
}

func TestNoL2popFloodsToAllTunnelsOfType(t *testing.T) {
	s, k := tunState(Config{TunnelTypes: []NetworkType{TypeVXLAN, TypeGRE}})
	eqLines(t, "flood", ownerFlows(t, s, OwnerNetwork(k), "br-tun"), wantLines(
		"table=4, priority=1,tun_id=0x64 actions=push_vlan:0x8100,set_field:4097->vlan_vid,goto_table:10",
		"table=22, priority=1,dl_vlan=1 actions=pop_vlan,set_field:0x64->tun_id,output:5,output:7",
	))
}

func TestL2popUnicastAndARPResponder(t *testing.T) {
	for _, arp := range []bool{false, true} {
		s, k := tunState(Config{L2Population: true, ARPResponder: arp, TunnelTypes: []NetworkType{TypeVXLAN}})
		n := s.Networks[k]
		n.FDB[netip.MustParseAddr("10.0.0.2")] = &RemoteFDB{Flood: true, Entries: []FDBEntry{
			{mac("fa:16:3e:00:00:01"), netip.MustParseAddr("192.168.0.11")},
			{mac("fa:16:3e:00:00:02"), netip.MustParseAddr("fd00::2")}, // IPv6: no ARP entry
		}}
		n.FDB[netip.MustParseAddr("10.0.0.3")] = &RemoteFDB{Entries: []FDBEntry{
			{mac("fa:16:3e:00:00:03"), netip.MustParseAddr("192.168.0.13")},
		}}
		// An entry for a remote without tunnel port is skipped, as in the reference.
		n.FDB[netip.MustParseAddr("10.0.0.99")] = &RemoteFDB{Flood: true, Entries: []FDBEntry{
			{mac("fa:16:3e:00:00:99"), netip.MustParseAddr("192.168.0.99")},
		}}
		want := []string{
			"table=4, priority=1,tun_id=0x64 actions=push_vlan:0x8100,set_field:4097->vlan_vid,goto_table:10",
			"table=22, priority=1,dl_vlan=1 actions=pop_vlan,set_field:0x64->tun_id,output:5",
			"table=20, priority=2,dl_vlan=1,dl_dst=fa:16:3e:00:00:01 actions=pop_vlan,set_field:0x64->tun_id,output:5",
			"table=20, priority=2,dl_vlan=1,dl_dst=fa:16:3e:00:00:02 actions=pop_vlan,set_field:0x64->tun_id,output:5",
			"table=20, priority=2,dl_vlan=1,dl_dst=fa:16:3e:00:00:03 actions=pop_vlan,set_field:0x64->tun_id,output:7",
		}
		if arp {
			want = append(want,
				"table=21, priority=1,arp,dl_vlan=1,arp_tpa=192.168.0.11 actions=set_field:2->arp_op,move:NXM_NX_ARP_SHA[]->NXM_NX_ARP_THA[],move:NXM_OF_ARP_SPA[]->NXM_OF_ARP_TPA[],set_field:fa:16:3e:00:00:01->arp_sha,set_field:192.168.0.11->arp_spa,move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[],set_field:fa:16:3e:00:00:01->eth_src,IN_PORT",
				"table=21, priority=1,arp,dl_vlan=1,arp_tpa=192.168.0.13 actions=set_field:2->arp_op,move:NXM_NX_ARP_SHA[]->NXM_NX_ARP_THA[],move:NXM_OF_ARP_SPA[]->NXM_OF_ARP_TPA[],set_field:fa:16:3e:00:00:03->arp_sha,set_field:192.168.0.13->arp_spa,move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[],set_field:fa:16:3e:00:00:03->eth_src,IN_PORT",
			)
		}
		eqLines(t, "l2pop arp="+map[bool]string{false: "off", true: "on"}[arp],
			ownerFlows(t, s, OwnerNetwork(k), "br-tun"), wantLines(want...))

		// Removing the unicast entries removes their flows.
		n.FDB[netip.MustParseAddr("10.0.0.3")].Entries = nil
		for _, l := range ownerFlows(t, s, OwnerNetwork(k), "br-tun") {
			if strings.Contains(l, "fa:16:3e:00:00:03") || strings.Contains(l, "192.168.0.13") {
				t.Errorf("removed entry still has a flow: %s", l)
			}
		}
	}
}

func TestTunBaseWithARPResponder(t *testing.T) {
	s, _ := tunState(Config{L2Population: true, ARPResponder: true, TunnelTypes: []NetworkType{TypeVXLAN}})
	got := ownerFlows(t, s, OwnerBase, "br-tun")
	for _, w := range []string{
		"table=2, priority=1,arp,dl_dst=ff:ff:ff:ff:ff:ff actions=goto_table:21",
		"table=21, priority=0 actions=goto_table:22",
	} {
		found := false
		for _, l := range got {
			found = found || l == w
		}
		if !found {
			t.Errorf("missing %s in\n%s", w, strings.Join(got, "\n"))
		}
	}
	// arp_responder without l2pop is ineffective, as in the reference.
	s, _ = tunState(Config{ARPResponder: true, TunnelTypes: []NetworkType{TypeVXLAN}})
	for _, l := range ownerFlows(t, s, OwnerBase, "br-tun") {
		if strings.Contains(l, "table=21") {
			t.Errorf("arp responder flow without l2pop: %s", l)
		}
	}
}

func TestTunnelPortFlows(t *testing.T) {
	s, _ := tunState(Config{TunnelTypes: []NetworkType{TypeVXLAN}})
	eqLines(t, "vxlan", ownerFlows(t, s, OwnerTunnel(netip.MustParseAddr("10.0.0.2")), "br-tun"),
		wantLines("priority=1,in_port=5 actions=goto_table:4"))
	// gre is not in tunnel_types: no flows for the gre tunnel.
	eqLines(t, "gre disabled", ownerFlows(t, s, OwnerTunnel(netip.MustParseAddr("10.0.0.4")), "br-tun"), nil)
	s.Config.TunnelTypes = append(s.Config.TunnelTypes, TypeGRE)
	eqLines(t, "gre", ownerFlows(t, s, OwnerTunnel(netip.MustParseAddr("10.0.0.4")), "br-tun"),
		wantLines("priority=1,in_port=9 actions=goto_table:3"))
}

// physState: physnet1 on br-phys (int-br-phys 1 on br-int, phy-br-phys 1),
// physnet2 on br-ex (int-br-ex 8, phy-br-ex 3).
func physState() *State {
	s := NewState(Config{FirewallDriver: FirewallNoop})
	s.Phys["physnet1"] = &PhysBridge{Bridge: "br-phys", IntOfport: 1, PhysOfport: 1}
	s.Phys["physnet2"] = &PhysBridge{Bridge: "br-ex", IntOfport: 8, PhysOfport: 3}
	return s
}

func TestVLANAndFlatTranslation(t *testing.T) {
	s := physState()
	vlan := Seg("net-v", 1234)
	flat := NoSeg("net-f")
	unmapped := Seg("net-u", 7)
	s.Networks[vlan] = &Network{Key: vlan, Type: TypeVLAN, PhysicalNetwork: "physnet2", LocalVLAN: 12}
	s.Networks[flat] = &Network{Key: flat, Type: TypeFlat, PhysicalNetwork: "physnet1", LocalVLAN: 13}
	s.Networks[unmapped] = &Network{Key: unmapped, Type: TypeVLAN, PhysicalNetwork: "physnet9", LocalVLAN: 14}

	eqLines(t, "vlan br-int", ownerFlows(t, s, OwnerNetwork(vlan), "br-int"),
		wantLines("priority=3,in_port=8,dl_vlan=1234 actions=set_field:4108->vlan_vid,goto_table:58"))
	eqLines(t, "vlan br-ex", ownerFlows(t, s, OwnerNetwork(vlan), "br-ex"),
		wantLines("priority=4,in_port=3,dl_vlan=12 actions=set_field:5330->vlan_vid,NORMAL"))
	eqLines(t, "flat br-int", ownerFlows(t, s, OwnerNetwork(flat), "br-int"),
		wantLines("priority=3,in_port=1,vlan_tci=0x0000/0x1fff actions=push_vlan:0x8100,set_field:4109->vlan_vid,goto_table:58"))
	eqLines(t, "flat br-phys", ownerFlows(t, s, OwnerNetwork(flat), "br-phys"),
		wantLines("priority=4,in_port=1,dl_vlan=13 actions=pop_vlan,NORMAL"))
	bf, _ := FlowsFor(s, OwnerNetwork(unmapped))
	if len(bf) != 0 {
		t.Errorf("unmapped physnet: %v", bf)
	}
	eqLines(t, "physnet2 br-int", ownerFlows(t, s, OwnerPhysnet("physnet2"), "br-int"),
		wantLines("priority=2,in_port=8 actions=drop"))
	eqLines(t, "physnet2 br-ex", ownerFlows(t, s, OwnerPhysnet("physnet2"), "br-ex"),
		wantLines("priority=2,in_port=3 actions=drop"))
	eqLines(t, "base br-ex", ownerFlows(t, s, OwnerBase, "br-ex"), wantLines("priority=0 actions=NORMAL"))
	// A local network has no flows at all.
	local := NoSeg("net-l")
	s.Networks[local] = &Network{Key: local, Type: TypeLocal, LocalVLAN: 15}
	if bf, _ := FlowsFor(s, OwnerNetwork(local)); len(bf) != 0 {
		t.Errorf("local network: %v", bf)
	}
}

// portState: one VLAN network (seg 101 on physnet1, local VLAN 2) and a VM port on ofport 5.
func portState(cfg Config) (*State, *Port) {
	s := NewState(cfg)
	s.Int.PatchTunOfport = 2
	s.Tun = &TunBridge{Name: "br-tun", PatchIntOfport: 1}
	s.Phys["physnet1"] = &PhysBridge{Bridge: "br-phys", IntOfport: 1, PhysOfport: 1}
	k := Seg("net-v", 101)
	s.Networks[k] = &Network{Key: k, Type: TypeVLAN, PhysicalNetwork: "physnet1", LocalVLAN: 2}
	p := &Port{ID: "p1", Name: "tapp1", Ofport: 5, MAC: mac("fa:16:3e:fa:95:0c"), Net: k, AdminUp: true,
		DeviceOwner: "compute:nova", PortSecurity: true, FixedIPs: []netip.Prefix{pfx("10.101.0.172")}}
	s.Ports[p.ID] = p
	return s, p
}

func TestDeadAndAdminDownPorts(t *testing.T) {
	for _, cfg := range []Config{
		{FirewallDriver: FirewallOpenvSwitch, EnableSecurityGroup: true},
		{FirewallDriver: FirewallNoop, ExplicitlyEgressDirect: true},
	} {
		for name, mutate := range map[string]func(p *Port, s *State){
			"dead":            func(p *Port, s *State) { p.Dead = true },
			"admin down":      func(p *Port, s *State) { p.AdminUp = false },
			"unknown network": func(p *Port, s *State) { p.Net = Seg("gone", 1) },
		} {
			s, p := portState(cfg)
			mutate(p, s)
			eqLines(t, cfg.FirewallDriver+" "+name, ownerFlows(t, s, OwnerPort(p.ID), "br-int"),
				wantLines("priority=2,in_port=5 actions=drop"))
		}
	}
	// A port not in the datapath (no ofport) has no flows.
	s, p := portState(Config{FirewallDriver: FirewallNoop})
	p.Ofport = 0
	if bf, _ := FlowsFor(s, OwnerPort(p.ID)); len(bf) != 0 {
		t.Errorf("port without ofport: %v", bf)
	}
}

func TestOVSFirewallEntryFlows(t *testing.T) {
	s, p := portState(Config{FirewallDriver: FirewallOpenvSwitch, EnableSecurityGroup: true})
	p.AllowedAddressPairs = []AddressPair{{MAC: mac("fa:16:3e:00:00:aa"), IP: pfx("10.101.0.200")}, {IP: pfx("10.101.0.201")}}
	eqLines(t, "filtered", ownerFlows(t, s, OwnerPort(p.ID), "br-int"), wantLines(
		"table=60, priority=100,in_port=5 actions=set_field:0x5->reg5,set_field:0x2->reg6,resubmit(,71)",
		"table=60, priority=90,dl_vlan=2,dl_dst=fa:16:3e:fa:95:0c actions=set_field:0x5->reg5,set_field:0x2->reg6,pop_vlan,resubmit(,81)",
		"table=60, priority=90,dl_vlan=101,dl_dst=fa:16:3e:fa:95:0c actions=set_field:0x5->reg5,set_field:0x2->reg6,pop_vlan,resubmit(,81)",
		"table=60, priority=90,dl_vlan=2,dl_dst=fa:16:3e:00:00:aa actions=set_field:0x5->reg5,set_field:0x2->reg6,pop_vlan,resubmit(,81)",
		"table=60, priority=90,dl_vlan=101,dl_dst=fa:16:3e:00:00:aa actions=set_field:0x5->reg5,set_field:0x2->reg6,pop_vlan,resubmit(,81)",
	))
	for _, mut := range []func(){func() { p.PortSecurity = false }, func() { p.PortSecurity = true; p.DeviceOwner = "network:dhcp" }} {
		mut()
		eqLines(t, "unfiltered", ownerFlows(t, s, OwnerPort(p.ID), "br-int"), wantLines(
			"table=60, priority=100,in_port=5 actions=set_field:0x5->reg5,set_field:0x2->reg6,resubmit(,73)",
		))
	}
	// enable_security_group=False means noop: anti-spoofing instead of the firewall.
	s.Config.EnableSecurityGroup = false
	p.DeviceOwner = "compute:nova"
	for _, l := range ownerFlows(t, s, OwnerPort(p.ID), "br-int") {
		if strings.Contains(l, "table=60") {
			t.Errorf("firewall flow with security groups disabled: %s", l)
		}
	}
}

func TestNoopAntiSpoofing(t *testing.T) {
	s, p := portState(Config{FirewallDriver: FirewallNoop})
	p.FixedIPs = append(p.FixedIPs, pfx("fd00::5"))
	p.AllowedAddressPairs = []AddressPair{{MAC: mac("fa:16:3e:00:00:aa"), IP: pfx("10.101.1.0/24")}}
	eqLines(t, "noop", ownerFlows(t, s, OwnerPort(p.ID), "br-int"), wantLines(
		"table=25, priority=2,in_port=5,dl_src=fa:16:3e:fa:95:0c actions=goto_table:30",
		"table=25, priority=2,in_port=5,dl_src=fa:16:3e:00:00:aa actions=goto_table:30",
		"priority=9,in_port=5 actions=goto_table:25",
		"table=24, priority=2,icmp6,in_port=5,icmp_type=136,nd_target=fd00::5 actions=goto_table:58",
		"table=24, priority=2,icmp6,in_port=5,icmp_type=136,nd_target=fe80::f816:3eff:fefa:950c actions=goto_table:58",
		"table=24, priority=2,icmp6,in_port=5,icmp_type=136,nd_target=fe80::f816:3eff:fe00:aa actions=goto_table:58",
		"priority=10,icmp6,in_port=5,icmp_type=136 actions=goto_table:24",
		"table=24, priority=2,arp,in_port=5,arp_spa=10.101.0.172 actions=goto_table:25",
		"table=24, priority=2,arp,in_port=5,arp_spa=10.101.1.0/24 actions=goto_table:25",
		"priority=10,arp,in_port=5 actions=goto_table:24",
	))
	// A /0 address pair disables the ARP protection (it would allow anything).
	p.AllowedAddressPairs = []AddressPair{{IP: pfx("0.0.0.0/0")}}
	for _, l := range ownerFlows(t, s, OwnerPort(p.ID), "br-int") {
		if strings.Contains(l, "arp") {
			t.Errorf("arp protection with a /0 pair: %s", l)
		}
	}
	// Port security off or a network: owner: no anti-spoofing at all.
	p.PortSecurity = false
	if got := ownerFlows(t, s, OwnerPort(p.ID), "br-int"); len(got) != 0 {
		t.Errorf("port security off: %v", got)
	}
}

func TestExplicitlyEgressDirect(t *testing.T) {
	s, p := portState(Config{FirewallDriver: FirewallNoop, ExplicitlyEgressDirect: true})
	p.PortSecurity = false
	eqLines(t, "port", ownerFlows(t, s, OwnerPort(p.ID), "br-int"), wantLines(
		"table=60, priority=9,in_port=5,dl_src=fa:16:3e:fa:95:0c actions=set_field:0x2->reg6,resubmit(,61)",
		"table=61, priority=12,dl_vlan=2,dl_dst=fa:16:3e:fa:95:0c actions=pop_vlan,output:5",
		"table=61, priority=12,reg6=0x2,dl_dst=fa:16:3e:fa:95:0c actions=output:5",
		"table=62, priority=10,in_port=5,dl_src=fa:16:3e:fa:95:0c,dl_dst=00:00:00:00:00:00/01:00:00:00:00:00 actions=push_vlan:0x8100,set_field:4098->vlan_vid,output:1",
	))
	base := ownerFlows(t, s, OwnerBase, "br-int")
	for _, w := range []string{"table=60, priority=4,in_port=2 actions=goto_table:61", "table=61, priority=0 actions=goto_table:62"} {
		found := false
		for _, l := range base {
			found = found || l == w
		}
		if !found {
			t.Errorf("base: missing %s", w)
		}
	}
	eqLines(t, "physnet", ownerFlows(t, s, OwnerPhysnet("physnet1"), "br-int"), wantLines(
		"priority=2,in_port=1 actions=drop",
		"table=60, priority=4,in_port=1 actions=goto_table:61",
	))
	// With the OVS firewall the firewall does the direct output (table 94).
	s.Config.FirewallDriver, s.Config.EnableSecurityGroup = FirewallOpenvSwitch, true
	for _, l := range ownerFlows(t, s, OwnerBase, "br-int") {
		if strings.Contains(l, "table=61") {
			t.Errorf("egress-direct base flow with the ovs firewall: %s", l)
		}
	}
}

func TestOwnerKeys(t *testing.T) {
	for _, k := range []NetKey{Seg("a/b", 5), NoSeg("n"), Seg("x", 0)} {
		got, err := parseNetKey(strings.TrimPrefix(OwnerNetwork(k), "net:"))
		if err != nil || got != k {
			t.Errorf("round trip %v: %v %v", k, got, err)
		}
	}
	s := NewState(Config{})
	for _, bad := range []string{"nope", "net:x", "net:x/abc", "tun:not-an-ip"} {
		if _, err := FlowsFor(s, bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	// Owners that no longer exist have no flows (the reconciler deletes theirs).
	for _, o := range []string{OwnerPort("gone"), OwnerNetwork(Seg("gone", 1)), OwnerTunnel(netip.MustParseAddr("10.9.9.9")), OwnerPhysnet("gone")} {
		bf, err := FlowsFor(s, o)
		if err != nil || len(bf) != 0 {
			t.Errorf("%s: %v %v", o, bf, err)
		}
	}
}

func TestLinkLocal(t *testing.T) {
	if got := LinkLocal(mac("fa:16:3e:18:c9:a5")).String(); got != "fe80::f816:3eff:fe18:c9a5" {
		t.Errorf("LinkLocal = %s", got)
	}
}

func TestProviderSegmentConflict(t *testing.T) {
	s := physState()
	f1, f2 := NoSeg("flat-1"), NoSeg("flat-2")
	s.Networks[f2] = &Network{Key: f2, Type: TypeFlat, PhysicalNetwork: "physnet1", LocalVLAN: 4}
	s.Networks[f1] = &Network{Key: f1, Type: TypeFlat, PhysicalNetwork: "physnet1", LocalVLAN: 9}
	eqLines(t, "winner", ownerFlows(t, s, OwnerNetwork(f2), "br-int"),
		wantLines("priority=3,in_port=1,vlan_tci=0x0000/0x1fff actions=push_vlan:0x8100,set_field:4100->vlan_vid,goto_table:58"))
	if bf, _ := FlowsFor(s, OwnerNetwork(f1)); len(bf) != 0 {
		t.Errorf("loser has flows: %v", bf)
	}
	// Once the winner is gone the other takes over (the agent dirties every
	// network of the physnet when one is removed).
	delete(s.Networks, f2)
	eqLines(t, "takeover", ownerFlows(t, s, OwnerNetwork(f1), "br-int"),
		wantLines("priority=3,in_port=1,vlan_tci=0x0000/0x1fff actions=push_vlan:0x8100,set_field:4105->vlan_vid,goto_table:58"))
}

func TestDependents(t *testing.T) {
	s := physState()
	s.Tun = &TunBridge{Name: "br-tun", PatchIntOfport: 1}
	v1, v2, f, x, vx := Seg("v1", 10), Seg("v2", 11), NoSeg("f"), Seg("x", 12), Seg("vx", 100)
	s.Networks[v1] = &Network{Key: v1, Type: TypeVLAN, PhysicalNetwork: "physnet1", LocalVLAN: 1}
	s.Networks[v2] = &Network{Key: v2, Type: TypeVLAN, PhysicalNetwork: "physnet1", LocalVLAN: 2}
	s.Networks[f] = &Network{Key: f, Type: TypeFlat, PhysicalNetwork: "physnet1", LocalVLAN: 3}
	s.Networks[x] = &Network{Key: x, Type: TypeVLAN, PhysicalNetwork: "physnet2", LocalVLAN: 4}
	s.Networks[vx] = &Network{Key: vx, Type: TypeVXLAN, LocalVLAN: 5}
	for owner, want := range map[string][]string{
		OwnerPhysnet("physnet1"):                     {OwnerNetwork(f), OwnerNetwork(v1), OwnerNetwork(v2)},
		OwnerNetwork(v1):                             {OwnerNetwork(f), OwnerNetwork(v2)},
		OwnerNetwork(vx):                             nil,
		OwnerTunnel(netip.MustParseAddr("10.0.0.1")): {OwnerNetwork(vx)},
		OwnerPort("p"):                               nil,
		OwnerBase:                                    nil,
	} {
		sort.Strings(want)
		if got := Dependents(s, owner); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("Dependents(%s) = %v, want %v", owner, got, want)
		}
	}
	if TableName(IntTables, 60) != "TRANSIENT" || TableName(TunTables, 22) != "FLOOD_TO_TUN" || TableName(PhysTables, 9) != "" {
		t.Error("TableName")
	}
}

// TestSharedAAPMAC: two ports of a network list the same MAC in their
// allowed address pairs (a VRRP pair), and a third has it as its own MAC on
// another network. Exactly one port owns each table-60 ingress flow.
func TestSharedAAPMAC(t *testing.T) {
	s, p := portState(Config{FirewallDriver: FirewallOpenvSwitch, EnableSecurityGroup: true})
	vip := mac("fa:16:3e:00:00:aa")
	p.AllowedAddressPairs = []AddressPair{{MAC: vip, IP: pfx("10.101.0.250")}}
	q := &Port{ID: "p2", Ofport: 9, MAC: mac("fa:16:3e:00:00:02"), Net: p.Net, AdminUp: true, PortSecurity: true,
		AllowedAddressPairs: []AddressPair{{MAC: vip, IP: pfx("10.101.0.250")}}}
	s.Ports[q.ID] = q
	has := func(port *Port) bool {
		for _, l := range ownerFlows(t, s, OwnerPort(port.ID), "br-int") {
			if strings.Contains(l, "dl_dst=fa:16:3e:00:00:aa") {
				return true
			}
		}
		return false
	}
	if !has(p) || has(q) {
		t.Errorf("lower ofport should win: p=%v q=%v", has(p), has(q))
	}
	if d := Dependents(s, OwnerPort(p.ID)); len(d) != 1 || d[0] != OwnerPort(q.ID) {
		t.Errorf("Dependents = %v", d)
	}
	if c := Conflicts(Compute(s)); len(c) != 0 {
		t.Error(c)
	}
	// The VIP becomes a port's own MAC: that port wins.
	r := &Port{ID: "p3", Ofport: 20, MAC: vip, Net: p.Net, AdminUp: true, PortSecurity: true}
	s.Ports[r.ID] = r
	if has(p) || has(q) || !has(r) {
		t.Errorf("own MAC should win: p=%v q=%v r=%v", has(p), has(q), has(r))
	}
	// p leaves: with r gone too, q takes over.
	delete(s.Ports, p.ID)
	delete(s.Ports, r.ID)
	if !has(q) {
		t.Error("q did not take over")
	}
}

func TestIPv6TunnelOwner(t *testing.T) {
	s, k := tunState(Config{TunnelTypes: []NetworkType{TypeVXLAN}})
	ip := netip.MustParseAddr("fd00::2")
	s.Tunnels[TunnelKey{ip, TypeVXLAN}] = &Tunnel{RemoteIP: ip, Type: TypeVXLAN, Ofport: 11}
	eqLines(t, "v6 tunnel", ownerFlows(t, s, OwnerTunnel(ip), "br-tun"),
		wantLines("priority=1,in_port=11 actions=goto_table:4"))
	eqLines(t, "flood includes v6 tunnel", ownerFlows(t, s, OwnerNetwork(k), "br-tun"), wantLines(
		"table=4, priority=1,tun_id=0x64 actions=push_vlan:0x8100,set_field:4097->vlan_vid,goto_table:10",
		"table=22, priority=1,dl_vlan=1 actions=pop_vlan,set_field:0x64->tun_id,output:5,output:7,output:11",
	))
}

// TestZeroState: a State with nil maps and no bridges computes without panicking.
func TestZeroState(t *testing.T) {
	s := &State{}
	d := Compute(s)
	if len(d[""]) == 0 {
		t.Errorf("no base flows for the unnamed integration bridge: %v", d)
	}
	for _, o := range []string{OwnerPort("x"), OwnerNetwork(NoSeg("n")), OwnerTunnel(netip.MustParseAddr("1.2.3.4")), OwnerPhysnet("p")} {
		if _, err := FlowsFor(s, o); err != nil {
			t.Error(err)
		}
		_ = Dependents(s, o)
	}
}

func FuzzOwner(f *testing.F) {
	for _, o := range []string{"base", "net:a/1", "net:a/None", "port:x", "tun:10.0.0.1", "tun:fd00::1", "physnet:p", "net:/", "x:y"} {
		f.Add(o)
	}
	s, _ := tunState(Config{L2Population: true, ARPResponder: true, TunnelTypes: []NetworkType{TypeVXLAN}})
	f.Fuzz(func(t *testing.T, owner string) {
		_, _ = FlowsFor(s, owner)
		_ = Dependents(s, owner)
	})
}

// Two tunnel ports to one remote IP (neutron's vxlan-0a000002 and
// gre-0a000002): each network floods to the port of its own type, and the
// remote IP's owner has the table-0 flow of both.
func TestTunnelsOfTwoTypesToOneHost(t *testing.T) {
	s, vx := tunState(Config{L2Population: true, TunnelTypes: []NetworkType{TypeVXLAN, TypeGRE}})
	ip := netip.MustParseAddr("10.0.0.2")
	s.Tunnels[TunnelKey{ip, TypeGRE}] = &Tunnel{RemoteIP: ip, Type: TypeGRE, Ofport: 11}
	gk := Seg("net-g", 200)
	s.Networks[gk] = &Network{Key: gk, Type: TypeGRE, LocalVLAN: 2, FDB: map[netip.Addr]*RemoteFDB{ip: {Flood: true}}}
	s.Networks[vx].FDB[ip] = &RemoteFDB{Flood: true}
	flood := func(k NetKey) string {
		for _, l := range ownerFlows(t, s, OwnerNetwork(k), "br-tun") {
			if strings.Contains(l, "table=22") {
				return l
			}
		}
		return ""
	}
	if l := flood(vx); !strings.Contains(l, "output:5") || strings.Contains(l, "output:11") {
		t.Errorf("vxlan flood flow: %q, want output:5 only", l)
	}
	if l := flood(gk); !strings.Contains(l, "output:11") || strings.Contains(l, "output:5") {
		t.Errorf("gre flood flow: %q, want output:11 only", l)
	}
	eqLines(t, "tun owner", ownerFlows(t, s, OwnerTunnel(ip), "br-tun"),
		wantLines("priority=1,in_port=5 actions=goto_table:4", "priority=1,in_port=11 actions=goto_table:3"))
	n := 0
	for _, o := range Owners(s) {
		if o == OwnerTunnel(ip) {
			n++
		}
	}
	if n != 1 {
		t.Errorf("owner %s listed %d times", OwnerTunnel(ip), n)
	}
}
