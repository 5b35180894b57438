package pipeline

import (
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	of "github.com/ovsagent/ovsagent/internal/openflow"
	"github.com/ovsagent/ovsagent/internal/testing/ovsdump"
)

// The refenv scenario: the reference agent on one host with a vxlan
// network (vm1, vm2), VLAN 101 on physnet1 (vm3), a flat network on physnet1
// (vm4), firewall_driver=openvswitch, l2_population on, arp_responder off.
// The state is built from the capture files the way the agent builds it:
// ofports from `ovs-ofctl show`, tags adopted from the Port table, networks
// and ports from the API.
//
// refenvZedDir holds the capture of the Zed reference agent (21.0.0). Our
// flows are the newest release's (2026.2), so the Zed comparison expects
// exactly the release differences listed in zedDifferences.
const refenvZedDir = "testdata/refenv"

// refenv2026Dir holds the capture of the 2026.2 reference agent (29.0.0),
// whose flows ours must equal outside the firewall tables.
const refenv2026Dir = "testdata/refenv-2026.2"

func readRef(t *testing.T, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return b
}

// parseOfctlShow maps port name -> ofport.
func parseOfctlShow(t *testing.T, dir, name string) map[string]uint32 {
	return ovsdump.OfctlPorts(string(readRef(t, dir, name)))
}

type ovsdbPort struct {
	Name        string
	Tag         int
	OtherConfig map[string]string
}

// parseOvsdbPorts reads `ovs-vsctl list Port` output.
func parseOvsdbPorts(t *testing.T, dir string) []ovsdbPort {
	var out []ovsdbPort
	for _, r := range ovsdump.Records(string(readRef(t, dir, "ovsdb-Port.txt"))) {
		p := ovsdbPort{Name: r["name"], OtherConfig: ovsdump.Map(r["other_config"])}
		if n, err := strconv.Atoi(r["tag"]); err == nil {
			p.Tag = n
		}
		out = append(out, p)
	}
	return out
}

type apiNetwork struct {
	ID       string  `json:"id"`
	Type     string  `json:"provider:network_type"`
	Physnet  *string `json:"provider:physical_network"`
	SegID    *uint32 `json:"provider:segmentation_id"`
	AdminUp  bool    `json:"admin_state_up"`
	Segments []any   `json:"segments"`
}

type apiPort struct {
	ID           string `json:"id"`
	NetworkID    string `json:"network_id"`
	MAC          string `json:"mac_address"`
	AdminUp      bool   `json:"admin_state_up"`
	DeviceOwner  string `json:"device_owner"`
	PortSecurity bool   `json:"port_security_enabled"`
	FixedIPs     []struct {
		IP string `json:"ip_address"`
	} `json:"fixed_ips"`
	AAP []struct {
		IP  string `json:"ip_address"`
		MAC string `json:"mac_address"`
	} `json:"allowed_address_pairs"`
}

func refenvConfig() Config {
	return Config{
		FirewallDriver:      FirewallOpenvSwitch,
		EnableSecurityGroup: true,
		L2Population:        true,
		ARPResponder:        false,
		TunnelTypes:         []NetworkType{TypeVXLAN},
	}
}

// refenvState builds the Zed capture's State.
func refenvState(t *testing.T) *State { return refenvStateIn(t, refenvZedDir) }

// refenvStateIn builds the State of the capture in dir. Port creation order
// in the scenario is vm1, vm2 (vxlan), vm3 (vlan), vm4 (flat).
func refenvStateIn(t *testing.T, dir string) *State {
	t.Helper()
	intPorts := parseOfctlShow(t, dir, "ofctl-show-br-int.txt")
	tunPorts := parseOfctlShow(t, dir, "ofctl-show-br-tun.txt")
	physPorts := parseOfctlShow(t, dir, "ofctl-show-br-phys.txt")

	s := NewState(refenvConfig())
	s.Int = IntBridge{Name: "br-int", Cookie: 0x1, PatchTunOfport: intPorts["patch-tun"]}
	s.Tun = &TunBridge{Name: "br-tun", Cookie: 0x2, PatchIntOfport: tunPorts["patch-int"]}
	s.Phys["physnet1"] = &PhysBridge{Bridge: "br-phys", Cookie: 0x3,
		IntOfport: intPorts["int-br-phys"], PhysOfport: physPorts["phy-br-phys"]}

	var nets struct{ Networks []apiNetwork }
	if err := json.Unmarshal(readRef(t, dir, "api-networks.json"), &nets); err != nil {
		t.Fatal(err)
	}
	var ports struct{ Ports []apiPort }
	if err := json.Unmarshal(readRef(t, dir, "api-ports.json"), &ports); err != nil {
		t.Fatal(err)
	}
	netByID := map[string]apiNetwork{}
	for _, n := range nets.Networks {
		netByID[n.ID] = n
	}

	// Adopt the tags found in OVSDB, as at an agent restart.
	vm := NewVLANManager()
	var existing []ExistingTag
	nameByIface := map[string]string{} // "tap" + first 11 chars of the port id
	byIfaceID := ifaceIDNames(t, dir, intPorts)
	for _, p := range parseOvsdbPorts(t, dir) {
		if p.OtherConfig["net_uuid"] == "" {
			continue
		}
		existing = append(existing, ExistingTag{Port: p.Name, Tag: p.Tag,
			NetUUID: p.OtherConfig["net_uuid"], SegmentationID: p.OtherConfig["segmentation_id"]})
		nameByIface[p.Name] = p.Name
	}
	if msgs := vm.Adopt(existing); len(msgs) != 0 {
		t.Fatalf("adopt: %v", msgs)
	}

	for _, ap := range ports.Ports {
		n := netByID[ap.NetworkID]
		key := NoSeg(n.ID)
		if n.SegID != nil {
			key = Seg(n.ID, *n.SegID)
		}
		if _, ok := s.Networks[key]; !ok {
			l, err := vm.Allocate(key)
			if err != nil {
				t.Fatal(err)
			}
			nw := &Network{Key: key, Type: NetworkType(n.Type), LocalVLAN: l}
			if n.Physnet != nil {
				nw.PhysicalNetwork = *n.Physnet
			}
			s.Networks[key] = nw
		}
		name := "tap" + ap.ID[:11]
		if n, ok := byIfaceID[ap.ID]; ok {
			name = n // a trunk's tpi-/spi- patch port stands for the port on br-int
		}
		mac, err := net.ParseMAC(ap.MAC)
		if err != nil {
			t.Fatal(err)
		}
		p := &Port{ID: ap.ID, Name: name, Ofport: intPorts[name], MAC: mac, Net: key,
			AdminUp: ap.AdminUp, DeviceOwner: ap.DeviceOwner, PortSecurity: ap.PortSecurity}
		for _, ip := range ap.FixedIPs {
			a := netip.MustParseAddr(ip.IP)
			p.FixedIPs = append(p.FixedIPs, netip.PrefixFrom(a, a.BitLen()))
		}
		if p.Ofport == 0 {
			t.Fatalf("port %s: no ofport for %s", ap.ID, name)
		}
		s.Ports[ap.ID] = p
	}
	vm.DisposeHints()
	return s
}

// ifaceIDNames maps iface-id to the br-int port carrying it, from the capture's
// ovsdb-Interface.txt when it has one (older captures do not: their VMs are all tap<id>).
func ifaceIDNames(t *testing.T, dir string, intPorts map[string]uint32) map[string]string {
	out := map[string]string{}
	b, err := os.ReadFile(filepath.Join(dir, "ovsdb-Interface.txt"))
	if err != nil {
		return out
	}
	for _, r := range ovsdump.Records(string(b)) {
		name := strings.Trim(r["name"], `"`)
		if id := ovsdump.Map(r["external_ids"])["iface-id"]; id != "" && intPorts[name] != 0 {
			out[id] = name
		}
	}
	return out
}

// refLines reads a reference dump, cookies masked (cookie=C), optionally filtered, sorted.
func refLines(t *testing.T, dir, name string, keep func(string) bool) []string {
	return ovsdump.Lines(string(readRef(t, dir, name)), keep, ovsdump.MaskCookie)
}

func renderAll(flows []of.Flow) []string {
	out := make([]string, 0, len(flows))
	for _, f := range flows {
		out = append(out, ovsdump.MaskCookie(f.String()))
	}
	sort.Strings(out)
	return out
}

// bridgeFlows flattens Desired for one bridge.
func bridgeFlows(d Desired, bridge string) []of.Flow {
	var out []of.Flow
	owners := make([]string, 0, len(d[bridge]))
	for o := range d[bridge] {
		owners = append(owners, o)
	}
	sort.Strings(owners)
	for _, o := range owners {
		out = append(out, d[bridge][o]...)
	}
	return out
}

// lineTable is a dump line's table (0 when the line has no table=).
func lineTable(l string) uint8 {
	n, _ := ovsdump.Table(l)
	return n
}

// knownDifference is a reference line we do not produce (missing) or a line
// we produce that the reference lacks (extra), with the reason.
type knownDifference struct {
	line   string // normalised
	reason string
}

// differences are the expected differences of one capture, per bridge.
type differences struct {
	missing, extra map[string][]knownDifference
}

// Reasons for the Zed (21.0.0) vs 2026.2 differences; docs/reference/releases.md
// has the release of each.
const (
	whyPRL     = "PACKET_RATE_LIMIT moved 59 -> 58 (BANDWIDTH_RATE_LIMIT took 59, neutron 23.0.0/2023.2): entry paths go to 58"
	whyBWL     = "the BANDWIDTH_RATE_LIMIT table 59 sits between 58 and 60 (neutron 23.0.0/2023.2)"
	whyNormal  = "table 60's default NORMAL is priority 1 (neutron 25.0.0/2024.2, backported to Zed), below the OVS firewall's egress-direct priority 2"
	whyTunLrn  = "GARP/RA/NA learn at priority 2 in LEARN_FROM_TUN (neutron 28.0.0/2026.1, backported to 2024.1+, bug 2123911)"
	learnActs  = "actions=learn(table=20,hard_timeout=300,priority=1,cookie=C,NXM_OF_VLAN_TCI[0..11],NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],load:0->NXM_OF_VLAN_TCI[],load:NXM_NX_TUN_ID[]->NXM_NX_TUN_ID[],output:OXM_OF_IN_PORT[]),output:1"
	zedTunPfx  = " cookie=C, table=10, priority=2,"
	zedIntPfx  = " cookie=C, "
	zedIntFlat = "priority=3,in_port=1,vlan_tci=0x0000/0x1fff actions=push_vlan:0x8100,set_field:4099->vlan_vid,goto_table:"
	zedIntVLAN = "priority=3,in_port=1,dl_vlan=101 actions=set_field:4098->vlan_vid,goto_table:"
)

// zedDifferences: every line by which the Zed reference agent's capture
// differs from our (2026.2) flows for the same state, outside the firewall
// tables. The Zed comparison fails on any other difference, and on a listed
// one that does not occur.
var zedDifferences = differences{
	missing: map[string][]knownDifference{
		"br-int": {
			{zedIntPfx + "priority=0 actions=goto_table:59", whyPRL},
			{zedIntPfx + zedIntVLAN + "59", whyPRL},
			{zedIntPfx + zedIntFlat + "59", whyPRL},
			{zedIntPfx + "table=30, priority=0 actions=goto_table:59", whyPRL},
			{zedIntPfx + "table=31, priority=0 actions=goto_table:59", whyPRL},
			{zedIntPfx + "table=60, priority=3 actions=NORMAL", whyNormal},
		},
	},
	extra: map[string][]knownDifference{
		"br-int": {
			{zedIntPfx + "priority=0 actions=goto_table:58", whyPRL},
			{zedIntPfx + zedIntVLAN + "58", whyPRL},
			{zedIntPfx + zedIntFlat + "58", whyPRL},
			{zedIntPfx + "table=30, priority=0 actions=goto_table:58", whyPRL},
			{zedIntPfx + "table=31, priority=0 actions=goto_table:58", whyPRL},
			{zedIntPfx + "table=58, priority=0 actions=goto_table:59", whyBWL},
			{zedIntPfx + "table=60, priority=1 actions=NORMAL", whyNormal},
		},
		"br-tun": {
			{zedTunPfx + "arp,arp_tha=ff:ff:ff:ff:ff:ff " + learnActs, whyTunLrn},
			{zedTunPfx + "icmp6,icmp_type=134 " + learnActs, whyTunLrn},
			{zedTunPfx + "icmp6,icmp_type=136 " + learnActs, whyTunLrn},
		},
	},
}

// checkBridge fails on every difference between want (the capture) and got
// (ours) that known does not list, and on every listed one that is absent.
func checkBridge(t *testing.T, bridge string, want, got []string, known differences) {
	t.Helper()
	missing, extra := ovsdump.Diff(want, got)
	filter := func(kind string, lines []string, known []knownDifference) []string {
		var out []string
		used := make([]bool, len(known))
	next:
		for _, l := range lines {
			for i, k := range known {
				if k.line == l && !used[i] {
					used[i] = true
					t.Logf("%s: expected difference (%s) %q: %s", bridge, kind, l, k.reason)
					continue next
				}
			}
			out = append(out, l)
		}
		for i, k := range known {
			if !used[i] {
				t.Errorf("%s: listed difference (%s) did not occur: %q (%s)", bridge, kind, k.line, k.reason)
			}
		}
		return out
	}
	missing = filter("missing", missing, known.missing[bridge])
	extra = filter("extra", extra, known.extra[bridge])
	for _, l := range missing {
		t.Errorf("%s: missing reference flow:\n%s", bridge, l)
	}
	for _, l := range extra {
		t.Errorf("%s: extra flow:\n%s", bridge, l)
	}
}

// refenvCaptures are the captures the golden tests compare with: the
// release, its directory and the differences expected from our flows.
func refenvCaptures() []struct {
	release, dir string
	known        differences
} {
	return []struct {
		release, dir string
		known        differences
	}{
		{"2026.2", refenv2026Dir, differences{}},
		{"zed", refenvZedDir, zedDifferences},
	}
}

func TestRefenvBrTun(t *testing.T) {
	for _, c := range refenvCaptures() {
		t.Run(c.release, func(t *testing.T) {
			d := Compute(refenvStateIn(t, c.dir))
			checkBridge(t, "br-tun", refLines(t, c.dir, "flows-br-tun.nostats.txt", nil), renderAll(bridgeFlows(d, "br-tun")), c.known)
		})
	}
}

func TestRefenvBrPhys(t *testing.T) {
	for _, c := range refenvCaptures() {
		t.Run(c.release, func(t *testing.T) {
			d := Compute(refenvStateIn(t, c.dir))
			checkBridge(t, "br-phys", refLines(t, c.dir, "flows-br-phys.nostats.txt", nil), renderAll(bridgeFlows(d, "br-phys")), c.known)
		})
	}
}

func TestRefenvBrIntNonFirewall(t *testing.T) {
	for _, c := range refenvCaptures() {
		t.Run(c.release, func(t *testing.T) {
			d := Compute(refenvStateIn(t, c.dir))
			want := refLines(t, c.dir, "flows-br-int.nostats.txt", func(l string) bool { return !IsFirewallTable(lineTable(l)) })
			got := renderAll(bridgeFlows(d, "br-int"))
			for _, l := range got {
				if IsFirewallTable(lineTable(l)) {
					t.Errorf("pipeline produced a flow in a firewall table: %s", l)
				}
			}
			checkBridge(t, "br-int", want, got, c.known)
			if len(want) == 0 {
				t.Fatal("no reference lines")
			}
		})
	}
}

// TestRefenvVLANs: the adopted tags are the reference's (vxlan 1, vlan 2, flat 3).
func TestRefenvVLANs(t *testing.T) {
	s := refenvState(t)
	want := map[string]uint16{
		"a60fae45-90d8-4e51-94da-69cb0ea8ca98/892":  1,
		"e1350ab8-acd3-4c4d-bae5-eb040986ee78/101":  2,
		"5456e011-2f30-4362-a116-c67c9277559e/None": 3,
	}
	for k, n := range s.Networks {
		if want[k.String()] != n.LocalVLAN {
			t.Errorf("%s: vlan %d, want %d", k, n.LocalVLAN, want[k.String()])
		}
	}
}

// TestRefenvOwners: every flow has exactly one owner, no flow entry (table,
// priority, match) is claimed twice on a bridge, and per-owner computation
// equals the whole.
func TestRefenvOwners(t *testing.T) {
	s := refenvState(t)
	d := Compute(s)
	for br, owners := range d {
		seen := map[string]string{}
		for o, fs := range owners {
			for _, f := range fs {
				k := f.Key()
				if prev, dup := seen[k]; dup {
					t.Errorf("%s: %s claimed by %s and %s", br, k, prev, o)
				}
				seen[k] = o
			}
			bf, err := FlowsFor(s, o)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := renderAll(bf[br]), renderAll(fs); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("%s owner %s: FlowsFor differs from Compute", br, o)
			}
		}
	}
}

// TestRefenvFreshAllocation: on a fresh host (nothing to adopt) the VLAN
// manager numbers the networks in the order their first port appears, which
// reproduces the capture's tags (ports were created vm1, vm2, vm3, vm4).
func TestRefenvFreshAllocation(t *testing.T) {
	var ports struct {
		Ports []struct {
			NetworkID string `json:"network_id"`
			Created   string `json:"created_at"`
			Name      string `json:"name"`
		}
	}
	if err := json.Unmarshal(readRef(t, refenvZedDir, "api-ports.json"), &ports); err != nil {
		t.Fatal(err)
	}
	sort.Slice(ports.Ports, func(i, j int) bool {
		a, b := ports.Ports[i], ports.Ports[j]
		if a.Created != b.Created {
			return a.Created < b.Created
		}
		return a.Name < b.Name
	})
	want := map[string]uint16{}
	for _, p := range parseOvsdbPorts(t, refenvZedDir) {
		if id := p.OtherConfig["net_uuid"]; id != "" {
			want[id] = uint16(p.Tag)
		}
	}
	m := NewVLANManager()
	for _, p := range ports.Ports {
		v, err := m.Allocate(NoSeg(p.NetworkID)) // segment is irrelevant to the order
		if err != nil {
			t.Fatal(err)
		}
		if v != want[p.NetworkID] {
			t.Errorf("%s (%s): vlan %d, reference %d", p.Name, p.NetworkID, v, want[p.NetworkID])
		}
	}
}

// refenvTrunkDir is the 2026.2 reference agent's capture of a vlan-aware VM
// (refenv/trunk_capture.sh): a trunk whose parent (tpi-) is on a vxlan network and whose
// subports (spi-) are on a vxlan network (VLAN 101 in the VM) and a VLAN network
// (physnet1 160, VLAN 102 in the VM). The trunk bridge's rows are internal/trunk's test.
const refenvTrunkDir = "../../docs/reference/captures-2026.2/trunk/wired"

// flatCapture links a capture.sh directory (ovs/ and the API files) into one directory,
// the layout refenvStateIn reads.
func flatCapture(t *testing.T, dir string) string {
	t.Helper()
	out := t.TempDir()
	for _, sub := range []string{dir, filepath.Join(dir, "ovs")} {
		ents, err := os.ReadDir(sub)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if e.IsDir() {
				continue
			}
			abs, err := filepath.Abs(filepath.Join(sub, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(abs, filepath.Join(out, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	return out
}

// TestRefenvTrunk: the flows the agent's ordinary wiring gives a trunk's parent and
// subports (tpi-/spi- patch ports with the Neutron ports' iface-ids) equal the
// reference's on br-int outside the firewall tables, br-tun and br-phys.
func TestRefenvTrunk(t *testing.T) {
	dir := flatCapture(t, refenvTrunkDir)
	s := refenvStateIn(t, dir)
	n := 0
	for _, p := range s.Ports {
		if strings.HasPrefix(p.Name, "tpi-") || strings.HasPrefix(p.Name, "spi-") {
			n++
		}
	}
	if n != 3 {
		t.Fatalf("%d tpi-/spi- ports in the state, want 3 (parent and two subports)", n)
	}
	d := Compute(s)
	for _, br := range []string{"br-tun", "br-phys"} {
		checkBridge(t, br, refLines(t, dir, "flows-"+br+".nostats.txt", nil), renderAll(bridgeFlows(d, br)), differences{})
	}
	want := refLines(t, dir, "flows-br-int.nostats.txt", func(l string) bool { return !IsFirewallTable(lineTable(l)) })
	checkBridge(t, "br-int", want, renderAll(bridgeFlows(d, "br-int")), differences{})
	t.Logf("br-int: %d reference lines outside the firewall tables compared", len(want))
}
