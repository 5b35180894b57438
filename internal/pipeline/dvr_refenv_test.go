package pipeline

import (
	"encoding/hex"
	"net/netip"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ovsagent/ovsagent/internal/testing/ovsdump"
)

// The DVR captures of the 2026.2 reference (refenv/dvr.sh, one, two and three
// hypervisors). The base pipeline with Config.Distributed must produce every
// line of them that is not DVR's own (internal/dvr's golden covers those) or
// l2population's (unicast, ARP and flood entries, covered by the l2pop tests),
// and nothing else.
const dvrCaptures = "../../docs/reference/captures-2026.2/dvr"

var dvrHosts = []string{"one-host", "two-hosts/hv1", "two-hosts/hv2",
	"three-hosts/hv1", "three-hosts/hv2", "three-hosts/hv3",
	"three-hosts-vlan/hv1", "three-hosts-vlan/hv2", "three-hosts-vlan/hv3",
	"three-hosts-gre/hv1", "three-hosts-gre/hv2", "three-hosts-gre/hv3",
	"three-hosts-geneve/hv1", "three-hosts-geneve/hv2", "three-hosts-geneve/hv3",
	"three-hosts-v6/hv1", "three-hosts-v6/hv2", "three-hosts-v6/hv3"}

// the tunnel ports' names (<type>-<remote IP in hex>)
var tunPortName = regexp.MustCompile(`^(vxlan|gre|geneve)-([0-9a-f]{8})$`)

// dvrCaptureState builds the base pipeline's State of one DVR capture: the
// bridges' patch ports, the tunnel ports (type and remote IP from the port
// name), and the networks with their local VLANs as the reference tagged them
// in OVSDB. The captures with GRE or Geneve tenant networks were taken with
// tunnel_types vxlan,gre,geneve (refenv/dvr.sh), the older ones with vxlan.
func dvrCaptureState(t *testing.T, dir string, distributed bool) *State {
	t.Helper()
	intPorts := parseOfctlShow(t, dir, "ofctl-show-br-int.txt")
	tunPorts := parseOfctlShow(t, dir, "ofctl-show-br-tun.txt")
	physPorts := parseOfctlShow(t, dir, "ofctl-show-br-phys.txt")
	s := NewState(Config{
		FirewallDriver: FirewallOpenvSwitch, EnableSecurityGroup: true,
		L2Population: true, ARPResponder: false, // forced on by DVR with tunnels
		TunnelTypes: tunnelTypesOf(dir), Distributed: distributed,
	})
	s.Int = IntBridge{Name: "br-int", Cookie: 0x1, PatchTunOfport: intPorts["patch-tun"]}
	s.Tun = &TunBridge{Name: "br-tun", Cookie: 0x2, PatchIntOfport: tunPorts["patch-int"]}
	s.Phys["physnet1"] = &PhysBridge{Bridge: "br-phys", Cookie: 0x3,
		IntOfport: intPorts["int-br-phys"], PhysOfport: physPorts["phy-br-phys"]}
	for _, p := range parseOvsdbPorts(t, dir) {
		oc := p.OtherConfig
		if oc["net_uuid"] == "" {
			continue
		}
		key := NoSeg(oc["net_uuid"])
		if seg := oc["segmentation_id"]; seg != "" {
			n, err := strconv.ParseUint(seg, 10, 32)
			if err != nil {
				t.Fatal(err)
			}
			key = Seg(oc["net_uuid"], uint32(n))
		}
		if _, ok := s.Networks[key]; ok {
			continue
		}
		n := &Network{Key: key, Type: NetworkType(oc["network_type"]), LocalVLAN: uint16(p.Tag)}
		if pn := oc["physical_network"]; pn != "None" {
			n.PhysicalNetwork = pn
		}
		s.Networks[key] = n
	}
	used := map[NetworkType]bool{}
	for _, n := range s.Networks {
		used[n.Type] = true
	}
	for name, ofport := range tunPorts {
		m := tunPortName.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		b, err := hex.DecodeString(m[2])
		if err != nil {
			t.Fatal(err)
		}
		ip, typ := netip.AddrFrom4([4]byte(b)), NetworkType(m[1])
		if !used[typ] {
			// left in the OVSDB by an earlier run of another tenant type (the geneve
			// capture keeps the gre run's ports): the reference neither uses nor removes
			// them (no flow), ovs-agent removes them; l2population never asked for them
			continue
		}
		s.Tunnels[TunnelKey{ip, typ}] = &Tunnel{RemoteIP: ip, Type: typ, Ofport: ofport}
	}
	if len(s.Networks) == 0 {
		t.Fatalf("%s: no networks in ovsdb-Port.txt", dir)
	}
	return s
}

// tunnelTypesOf: the agents' tunnel_types when capture dir was taken.
func tunnelTypesOf(dir string) []NetworkType {
	if strings.Contains(dir, "three-hosts-gre") || strings.Contains(dir, "three-hosts-geneve") {
		return []NetworkType{TypeVXLAN, TypeGRE, TypeGeneve}
	}
	return []NetworkType{TypeVXLAN}
}

// dvrOwnedLine: the lines internal/dvr produces (docs/dvr.md, "The flows").
func dvrOwnedLine(bridge, l string) bool {
	tbl, prio := lineTable(l), linePriority(l)
	switch bridge {
	case "br-tun":
		return (tbl == 0 && strings.Contains(l, "in_port=1 ") && prio == 1) || // in_port=patch-int, checked below
			tbl == 1 || tbl == 9 || (tbl == 22 && prio == 3)
	case "br-phys":
		return (tbl == 0 && prio != 0) || tbl == 1 || (tbl == 2 && prio == 2) || tbl == 3 || (tbl == 22 && prio == 3)
	}
	return false
}

// l2popLine: entries from l2population's FDB (not built by dvrCaptureState)
// and flows learnt by table 10.
func l2popLine(l string) bool {
	tbl, prio := lineTable(l), linePriority(l)
	return (tbl == 20 && prio >= 1) || (tbl == 21 && prio == 1) || (tbl == 22 && prio == 1)
}

var prioRe = regexp.MustCompile(`priority=(\d+)`)

func linePriority(l string) int {
	m := prioRe.FindStringSubmatch(l)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func TestDVRCapturesBasePipeline(t *testing.T) {
	for _, h := range dvrHosts {
		t.Run(h, func(t *testing.T) {
			dir := filepath.Join(dvrCaptures, h, "ovs")
			if p := parseOfctlShow(t, dir, "ofctl-show-br-tun.txt")["patch-int"]; p != 1 {
				t.Fatalf("patch-int is ofport %d, dvrOwnedLine assumes 1", p)
			}
			d := Compute(dvrCaptureState(t, dir, true))
			for _, br := range []string{"br-tun", "br-phys"} {
				want := refLines(t, dir, "flows-"+br+".nostats.txt", func(l string) bool {
					return !dvrOwnedLine(br, l) && !l2popLine(l)
				})
				got := renderAll(bridgeFlows(d, br))
				missing, extra := ovsdump.Diff(want, got)
				for _, l := range missing {
					t.Errorf("%s: missing flow:\n%s", br, l)
				}
				for _, l := range extra {
					t.Errorf("%s: extra flow:\n%s", br, l)
				}
			}
		})
	}
}

// Without the switch the same state gives the non-DVR pipeline: the
// patch-int and phy-br-phys table-0 flows DVR replaces, LEARN_FROM_TUN after
// the tunnel's VLAN, the translation in table 0, no ARP responder (arp_responder
// is off in the capture's configuration state).
func TestDVRCapturesNeedDistributed(t *testing.T) {
	dir := filepath.Join(dvrCaptures, "two-hosts/hv1", "ovs")
	d := Compute(dvrCaptureState(t, dir, false))
	got := strings.Join(renderAll(append(bridgeFlows(d, "br-tun"), bridgeFlows(d, "br-phys")...)), "\n")
	for _, s := range []string{
		"priority=1,in_port=1 actions=goto_table:2",
		"goto_table:10",
		"priority=2,in_port=1 actions=drop",
		"cookie=C, priority=4,in_port=1,dl_vlan=2 actions=pop_vlan,NORMAL",
	} {
		if !strings.Contains(got, s) {
			t.Errorf("non-distributed pipeline lacks %q", s)
		}
	}
	if strings.Contains(got, "goto_table:21") {
		t.Errorf("ARP responder on without DVR and arp_responder")
	}
}
