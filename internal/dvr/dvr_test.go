package dvr

import (
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	of "github.com/ovsagent/ovsagent/internal/openflow"
	"github.com/ovsagent/ovsagent/internal/testing/ovsdump"
)

// The captures (docs/reference/captures-2026.2/dvr, copied to testdata/):
// the 2026.2 reference agent with enable_distributed_routing beside the real
// L3 agent, refenv/dvr.sh. two-hosts: hv1 (dvr_snat, vm1 on A, the csnat
// ports) and hv2 (dvr, vm2 on B with a floating IP, vm3 on A); one-host:
// hv1 only (no other DVR MAC); three-hosts: hv1 the network node (dvr_snat,
// no VM), hv2 (dvr, vm1 on A), hv3 (dvr, vm2 on B with a floating IP, vm3). The state is built the way the agent will
// build it: ofports from `ovs-ofctl show`, local VLANs from the Port rows'
// tags, networks, subnets and ports from the API (what the RPCs return),
// DVR MACs from the server's table.

func read(t *testing.T, path ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(path...))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func ofports(t *testing.T, dir, bridge string) map[string]uint32 {
	return ovsdump.OfctlPorts(string(read(t, dir, "ofctl-show-"+bridge+".txt")))
}

// localVLANs reads `ovs-vsctl list Port`: network id (other_config net_uuid) -> tag.
func localVLANs(t *testing.T, dir string) map[string]uint16 {
	out := map[string]uint16{}
	for _, r := range ovsdump.Records(string(read(t, dir, "ovsdb-Port.txt"))) {
		tag, err := strconv.Atoi(r["tag"])
		if id := ovsdump.Map(r["other_config"])["net_uuid"]; err == nil && id != "" {
			out[id] = uint16(tag)
		}
	}
	return out
}

type apiNet struct {
	ID      string  `json:"id"`
	Type    string  `json:"provider:network_type"`
	Physnet *string `json:"provider:physical_network"`
	SegID   *int    `json:"provider:segmentation_id"`
}
type apiSubnet struct {
	ID        string  `json:"id"`
	NetworkID string  `json:"network_id"`
	CIDR      string  `json:"cidr"`
	GatewayIP *string `json:"gateway_ip"`
}
type apiPort struct {
	ID          string `json:"id"`
	NetworkID   string `json:"network_id"`
	MAC         string `json:"mac_address"`
	DeviceOwner string `json:"device_owner"`
	FixedIPs    []struct {
		SubnetID string `json:"subnet_id"`
		IP       string `json:"ip_address"`
	} `json:"fixed_ips"`
	Pairs []struct {
		IP  string `json:"ip_address"`
		MAC string `json:"mac_address"`
	} `json:"allowed_address_pairs"`
}

func mustMAC(t *testing.T, s string) net.HardwareAddr {
	m, err := ParseHostMAC(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// captureState builds host's State from capture dir (shared API files) and
// hvDir (that host's OVS dumps).
func captureState(t *testing.T, dir, hvDir, host string) *State {
	t.Helper()
	intP, tunP, physP := ofports(t, hvDir, "br-int"), ofports(t, hvDir, "br-tun"), ofports(t, hvDir, "br-phys")
	s := &State{
		Config: Config{Tunneling: true},
		Bridges: Bridges{IntPatchTun: intP["patch-tun"], TunPatchInt: tunP["patch-int"],
			Phys: map[string]PhysPatch{"physnet1": {Bridge: "br-phys", IntOfport: intP["int-br-phys"], PhysOfport: physP["phy-br-phys"]}}},
		Networks: map[string]*Network{},
		Subnets:  map[string]*Subnet{},
	}
	var list []HostMAC
	for _, l := range strings.Split(strings.TrimSpace(string(read(t, dir, "dvr_host_macs.txt"))), "\n") {
		h, m, _ := strings.Cut(l, "\t")
		list = append(list, HostMAC{Host: h, MAC: m})
		if h == host {
			s.LocalMAC = mustMAC(t, m)
		}
	}
	if s.LocalMAC == nil {
		t.Fatalf("no DVR MAC for %s in %s", host, dir)
	}
	others, err := OtherHostMACs(s.LocalMAC, list)
	if err != nil {
		t.Fatal(err)
	}
	s.Others = others

	lvs := localVLANs(t, hvDir)
	var nets struct{ Networks []apiNet }
	var subs struct{ Subnets []apiSubnet }
	var ports struct{ Ports []apiPort }
	for name, v := range map[string]any{"api-networks.json": &nets, "api-subnets.json": &subs, "api-ports.json": &ports} {
		if err := json.Unmarshal(read(t, dir, name), v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	for _, n := range nets.Networks {
		lv, ok := lvs[n.ID]
		if !ok {
			continue // not provisioned on this host
		}
		nw := &Network{Type: n.Type, LocalVLAN: lv}
		if n.Physnet != nil {
			nw.PhysicalNetwork = *n.Physnet
		}
		if n.SegID != nil && n.Type == "vlan" {
			nw.SegmentationID = uint16(*n.SegID)
		}
		s.Networks[n.ID] = nw
	}
	// get_subnet_for_dvr: gateway_mac is the MAC of the port holding the gateway IP
	for _, sn := range subs.Subnets {
		sub := &Subnet{ID: sn.ID, NetworkID: sn.NetworkID, CIDR: netip.MustParsePrefix(sn.CIDR)}
		if sn.GatewayIP != nil {
			sub.GatewayIP = netip.MustParseAddr(*sn.GatewayIP)
			for _, p := range ports.Ports {
				for _, ip := range p.FixedIPs {
					if ip.SubnetID == sn.ID && ip.IP == *sn.GatewayIP {
						sub.GatewayMAC = mustMAC(t, p.MAC)
					}
				}
			}
		}
		s.Subnets[sn.ID] = sub
	}
	for _, ap := range ports.Ports {
		ofp, ok := intP["tap"+ap.ID[:11]]
		if !ok {
			continue // not plugged on this host
		}
		p := &Port{ID: ap.ID, Kind: KindOf(ap.DeviceOwner), NetworkID: ap.NetworkID, Ofport: ofp, MAC: mustMAC(t, ap.MAC)}
		for _, ip := range ap.FixedIPs {
			p.FixedIPs = append(p.FixedIPs, FixedIP{SubnetID: ip.SubnetID, IP: netip.MustParseAddr(ip.IP)})
		}
		for _, pr := range ap.Pairs {
			pf, err := netip.ParsePrefix(pr.IP)
			if err != nil {
				a := netip.MustParseAddr(pr.IP)
				pf = netip.PrefixFrom(a, a.BitLen())
			}
			p.Pairs = append(p.Pairs, AddressPair{IP: pf, MAC: mustMAC(t, pr.MAC)})
		}
		s.Ports = append(s.Ports, p)
	}
	return s
}

// render is Flows' output as the capture's lines compare: cookies dropped, sorted.
func render(fs []of.Flow) []string {
	out := make([]string, 0, len(fs))
	for _, f := range fs {
		out = append(out, ovsdump.DropCookie(f.String()))
	}
	sort.Strings(out)
	return out
}

var priorityRe = regexp.MustCompile(`priority=(\d+)`)

// tablePrio is a flow line's table and priority (-1, -1 for a line that is no flow).
func tablePrio(l string) (int, int) {
	m := priorityRe.FindStringSubmatch(l)
	if m == nil {
		return -1, -1
	}
	t, _ := ovsdump.Table(l) // dump-flows omits table=0
	p, _ := strconv.Atoi(m[1])
	return int(t), p
}

// dvrOwned selects the reference lines that ovs_dvr_neutron_agent.py
// installs, per bridge: every one of them must come out of Flows.
func dvrOwned(bridge string, macs []string) func(string) bool {
	hasMAC := func(l string) bool {
		for _, m := range macs {
			if strings.Contains(l, m) {
				return true
			}
		}
		return false
	}
	return func(l string) bool {
		t, p := tablePrio(l)
		switch bridge {
		case "br-int":
			return (t >= 1 && t <= 4) || (t == 60 && p == 20) || (t == 0 && hasMAC(l))
		case "br-tun":
			return t == 1 || t == 9 || (t == 22 && p == 3) || (t == 0 && p == 1 && strings.Contains(l, "in_port=1 "))
		case "br-phys":
			// t22 p3: install_dvr_process_ipv4's ARP drop, written to br-phys for VLAN/flat tenant networks
			return t == 1 || t == 3 || (t == 2 && p == 2) || (t == 0 && (p == 1 || p == 2)) || (t == 22 && p == 3)
		}
		return false
	}
}

// refLines is the capture's flows of a bridge, cookies dropped, sorted: all of them, and those
// keep selects.
func refLines(t *testing.T, hvDir, bridge string, keep func(string) bool) (all, owned []string) {
	all = ovsdump.Lines(string(read(t, hvDir, "flows-"+bridge+".nostats.txt")), nil, ovsdump.DropCookie)
	for _, l := range all {
		if keep(l) {
			owned = append(owned, l)
		}
	}
	return all, owned
}

func TestGoldenAgainstReference(t *testing.T) {
	cases := []struct {
		name, dir, hv, host string
		wantOthers          int
	}{
		{"two-hosts/hv1 (dvr_snat)", "testdata/2026.2-two-hosts", "hv1", "refhv-2026-2-dvr", 1},
		{"two-hosts/hv2 (dvr)", "testdata/2026.2-two-hosts", "hv2", "refhv-2026-2-dvr-hv2", 1},
		{"one-host/hv1", "testdata/2026.2-one-host", "hv1", "refhv-2026-2-dvr", 0},
		{"three-hosts/hv1 (network node, dvr_snat, no VM)", "testdata/2026.2-three-hosts", "hv1", "refhv-2026-2-dvr", 2},
		{"three-hosts/hv2 (dvr, vm1)", "testdata/2026.2-three-hosts", "hv2", "refhv-2026-2-dvr-hv2", 2},
		{"three-hosts/hv3 (dvr, vm2 + floating IP, vm3)", "testdata/2026.2-three-hosts", "hv3", "refhv-2026-2-dvr-hv3", 2},
		// the same scenario with A and B on VLAN networks of physnet1 (TENANT=vlan refenv/dvr_tenant.sh)
		{"three-hosts-vlan/hv1 (network node, dvr_snat, no VM)", "testdata/2026.2-three-hosts-vlan", "hv1", "refhv-2026-2-dvr", 2},
		{"three-hosts-vlan/hv2 (dvr, vm1)", "testdata/2026.2-three-hosts-vlan", "hv2", "refhv-2026-2-dvr-hv2", 2},
		{"three-hosts-vlan/hv3 (dvr, vm2 + floating IP, vm3)", "testdata/2026.2-three-hosts-vlan", "hv3", "refhv-2026-2-dvr-hv3", 2},
		// and on GRE / Geneve networks (TENANT=gre|geneve refenv/dvr_tenant.sh; agents with
		// tunnel_types vxlan,gre,geneve)
		{"three-hosts-gre/hv1 (network node, dvr_snat, no VM)", "testdata/2026.2-three-hosts-gre", "hv1", "refhv-2026-2-dvr", 2},
		{"three-hosts-gre/hv2 (dvr, vm1)", "testdata/2026.2-three-hosts-gre", "hv2", "refhv-2026-2-dvr-hv2", 2},
		{"three-hosts-gre/hv3 (dvr, vm2 + floating IP, vm3)", "testdata/2026.2-three-hosts-gre", "hv3", "refhv-2026-2-dvr-hv3", 2},
		{"three-hosts-geneve/hv1 (network node, dvr_snat, no VM)", "testdata/2026.2-three-hosts-geneve", "hv1", "refhv-2026-2-dvr", 2},
		{"three-hosts-geneve/hv2 (dvr, vm1)", "testdata/2026.2-three-hosts-geneve", "hv2", "refhv-2026-2-dvr-hv2", 2},
		{"three-hosts-geneve/hv3 (dvr, vm2 + floating IP, vm3)", "testdata/2026.2-three-hosts-geneve", "hv3", "refhv-2026-2-dvr-hv3", 2},
		// VXLAN A and B with IPv6 subnets beside the IPv4 ones, on the router (TENANT=vxlan IPV6=1
		// refenv/dvr_tenant.sh run): a router port per subnet
		{"three-hosts-v6/hv1 (network node, dvr_snat, no VM)", "testdata/2026.2-three-hosts-v6", "hv1", "refhv-2026-2-dvr", 2},
		{"three-hosts-v6/hv2 (dvr, vm1)", "testdata/2026.2-three-hosts-v6", "hv2", "refhv-2026-2-dvr-hv2", 2},
		{"three-hosts-v6/hv3 (dvr, vm2 + floating IP, vm3)", "testdata/2026.2-three-hosts-v6", "hv3", "refhv-2026-2-dvr-hv3", 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hvDir := filepath.Join(c.dir, c.hv)
			s := captureState(t, c.dir, hvDir, c.host)
			if len(s.Others) != c.wantOthers {
				t.Fatalf("other DVR MACs %v, want %d", s.Others, c.wantOthers)
			}
			d, err := Flows(s)
			if err != nil {
				t.Fatal(err)
			}
			macs := []string{s.LocalMAC.String()}
			for _, m := range s.Others {
				macs = append(macs, m.String())
			}
			for _, b := range []struct {
				name string
				got  []of.Flow
			}{{"br-int", d.Int}, {"br-tun", d.Tun}, {"br-phys", d.Phys["br-phys"]}} {
				all, owned := refLines(t, hvDir, b.name, dvrOwned(b.name, macs))
				if len(owned) == 0 {
					t.Fatalf("%s: no DVR line selected in the capture: the selection is wrong", b.name)
				}
				got := render(b.got)
				// every flow produced is a reference line (as often as the reference has it),
				// every reference DVR line is produced
				_, notInRef := ovsdump.Diff(all, got)
				for _, l := range notInRef {
					t.Errorf("%s: not in the reference's flows (or produced twice): %s", b.name, l)
				}
				_, notProduced := ovsdump.Diff(got, owned)
				for _, l := range notProduced {
					t.Errorf("%s: reference DVR flow not produced: %s", b.name, l)
				}
				t.Logf("%s: %d DVR flows, all in the reference's %d; its %d DVR-owned lines all produced", b.name, len(got), len(all), len(owned))
			}
		})
	}
}

// Without this host's DVR MAC (get_dvr_mac_address_by_host failed) the agent
// is not in distributed mode: no DVR flow at all.
func TestNotDistributedWithoutLocalMAC(t *testing.T) {
	s := captureState(t, "testdata/2026.2-two-hosts", "testdata/2026.2-two-hosts/hv1", "refhv-2026-2-dvr")
	s.LocalMAC = nil
	d, err := Flows(s)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(d.Int) + len(d.Tun) + len(d.Phys); n != 0 {
		t.Fatalf("%d flows without a DVR MAC", n)
	}
}

// A port whose subnet the agent has no get_subnet_for_dvr answer for is an
// error, not a half-plumbed router interface.
func TestUnknownSubnetIsAnError(t *testing.T) {
	s := captureState(t, "testdata/2026.2-two-hosts", "testdata/2026.2-two-hosts/hv1", "refhv-2026-2-dvr")
	for _, p := range s.Ports {
		if p.Kind == KindRouterInterface {
			delete(s.Subnets, p.FixedIPs[0].SubnetID)
			break
		}
	}
	if _, err := Flows(s); err == nil || !strings.Contains(err.Error(), "unknown") {
		t.Fatalf("err = %v, want unknown subnet", err)
	}
}

// Allowed address pairs with a host address inside the subnet get their own
// DVR_TO_SRC_MAC pair (_bind_port_on_dvr_subnet); others do not.
func TestAllowedAddressPairs(t *testing.T) {
	s := captureState(t, "testdata/2026.2-two-hosts", "testdata/2026.2-two-hosts/hv2", "refhv-2026-2-dvr-hv2")
	before, err := Flows(s)
	if err != nil {
		t.Fatal(err)
	}
	var vm *Port
	for _, p := range s.Ports {
		if p.Kind == KindServiced {
			vm = p
			break
		}
	}
	sub := s.Subnets[vm.FixedIPs[0].SubnetID]
	in := sub.CIDR.Addr().Next().Next().Next() // a host address inside the subnet
	aapMAC := net.HardwareAddr{0xfa, 0x16, 0x3e, 0, 0, 0x42}
	vm.Pairs = []AddressPair{
		{IP: netip.PrefixFrom(in, 32), MAC: aapMAC},
		{IP: netip.MustParsePrefix("192.0.2.0/24"), MAC: net.HardwareAddr{0xfa, 0x16, 0x3e, 0, 0, 0x43}},                     // not a host route
		{IP: netip.PrefixFrom(netip.MustParseAddr("198.51.100.7"), 32), MAC: net.HardwareAddr{0xfa, 0x16, 0x3e, 0, 0, 0x44}}, // outside the subnet
	}
	after, err := Flows(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(after.Int) - len(before.Int); got != 2 {
		t.Fatalf("%d more br-int flows, want 2 (table 1 and table 60 for %s)", got, aapMAC)
	}
	var n int
	for _, f := range after.Int {
		if strings.Contains(f.String(), "dl_dst="+aapMAC.String()) {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d flows for the pair's MAC, want 2", n)
	}
}

func TestParseHostMAC(t *testing.T) {
	for in, want := range map[string]string{
		"FA-16-3F-8E-8E-11": "fa:16:3f:8e:8e:11", // what the server sends
		"fa:16:3f:58:35:bd": "fa:16:3f:58:35:bd",
	} {
		m, err := ParseHostMAC(in)
		if err != nil || m.String() != want {
			t.Errorf("ParseHostMAC(%q) = %v, %v; want %s", in, m, err, want)
		}
	}
	for _, bad := range []string{"", "FA-16-3F", "00:00:00:00:fe:80:00:00:00:00:00:00:02:00:5e:10:00:00:00:01", "zz-16-3f-8e-8e-11"} {
		if _, err := ParseHostMAC(bad); err == nil {
			t.Errorf("ParseHostMAC(%q) accepted", bad)
		}
	}
}

func TestOtherHostMACs(t *testing.T) {
	local := mustMAC(t, "FA-16-3F-8E-8E-11")
	got, err := OtherHostMACs(local, []HostMAC{
		{"hv2", "FA-16-3F-58-35-BD"}, {"hv1", "FA-16-3F-8E-8E-11"}, {"hv3", "fa:16:3f:00:00:01"}, {"hv2-again", "fa:16:3f:58:35:bd"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].String() != "fa:16:3f:00:00:01" || got[1].String() != "fa:16:3f:58:35:bd" {
		t.Fatalf("got %v", got)
	}
	if _, err := OtherHostMACs(local, []HostMAC{{"bad", "nope"}}); err == nil || !strings.Contains(err.Error(), `"bad"`) {
		t.Fatalf("err = %v, want the host named", err)
	}
}

func TestKindOf(t *testing.T) {
	for owner, want := range map[string]Kind{
		"network:router_interface_distributed": KindRouterInterface,
		"network:router_centralized_snat":      KindCentralizedSNAT,
		"compute:nova":                         KindServiced,
		"compute:":                             KindServiced,
		"network:dhcp":                         KindServiced,
		"network:router_gateway":               KindOther,
		"network:floatingip_agent_gateway":     KindOther,
		"":                                     KindOther,
	} {
		if got := KindOf(owner); got != want {
			t.Errorf("KindOf(%q) = %v, want %v", owner, got, want)
		}
	}
}
