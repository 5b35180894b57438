package dvr

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ovsagent/ovsagent/internal/feature"
	of "github.com/ovsagent/ovsagent/internal/openflow"
	"github.com/ovsagent/ovsagent/internal/testing/ovsdump"
)

// The reference captures of the DVR scenario (refenv/dvr.sh capture): what
// the 2026.2 reference agent left on each hypervisor's bridges.
var captureHosts = []string{"one-host", "two-hosts/hv1", "two-hosts/hv2", "three-hosts/hv1", "three-hosts/hv2", "three-hosts/hv3",
	"three-hosts-vlan/hv1", "three-hosts-vlan/hv2", "three-hosts-vlan/hv3",
	"three-hosts-gre/hv1", "three-hosts-gre/hv2", "three-hosts-gre/hv3",
	"three-hosts-geneve/hv1", "three-hosts-geneve/hv2", "three-hosts-geneve/hv3",
	"three-hosts-v6/hv1", "three-hosts-v6/hv2", "three-hosts-v6/hv3"}

const capturesDir = "../../docs/reference/captures-2026.2/dvr"

var captureLayout = feature.BridgeLayout{Integration: "br-int", Tunnel: "br-tun", PatchTun: 2, PatchInt: 1,
	Physical: map[string]feature.PhysBridge{"physnet1": {Bridge: "br-phys", IntOFPort: 1, PhyOFPort: 1}}}

var (
	// the priority, match and actions of a DVR-table line (cookie and table: ovsdump)
	flowBodyRe = regexp.MustCompile(`priority=(\d+)(,\S+)? actions=(\S+)$`)
	bridges    = []string{"br-int", "br-tun", "br-phys"}
)

// captureHost reads a capture's flows in DVR's tables (and only those: the
// parser knows the forms found there, and fails on anything else).
func captureHost(t *testing.T, host string) feature.HostState {
	t.Helper()
	h := feature.HostState{Layout: captureLayout, Bridges: bridges, Flows: map[string][]of.Flow{}}
	for _, br := range bridges {
		r := map[string]role{"br-int": roleInt, "br-tun": roleTun, "br-phys": rolePhys}[br]
		b, err := os.ReadFile(filepath.Join(capturesDir, host, "ovs", "flows-"+br+".nostats.txt"))
		if err != nil {
			t.Fatal(err)
		}
		dvrLine := func(l string) bool {
			tb, ok := ovsdump.Table(l)
			return ok && slices.Contains(r.tables(), tb)
		}
		for _, l := range ovsdump.Lines(string(b), dvrLine, nil) {
			h.Flows[br] = append(h.Flows[br], parseFlow(t, l))
		}
		if len(h.Flows[br]) == 0 {
			t.Fatalf("%s %s: no flow in DVR tables read", host, br)
		}
	}
	return h
}

// parseFlow reads a DVR-table line's match and actions into a flow (ovsdump has
// no flow parser: the forms are the few found in DVR's tables; any other field or
// action fails the test, and the flow must render back as the line).
func parseFlow(t *testing.T, line string) of.Flow {
	t.Helper()
	ck, ok1 := ovsdump.Cookie(line)
	tb, ok2 := ovsdump.Table(line)
	m := flowBodyRe.FindStringSubmatch(line)
	if !ok1 || !ok2 || m == nil {
		t.Fatalf("%q: not a dump-flows line", line)
	}
	c, _ := strconv.ParseUint(ck, 0, 64)
	p, _ := strconv.Atoi(m[1])
	f := of.Flow{Cookie: c, Table: tb, Priority: uint16(p)}
	num := func(s string) uint64 {
		n, err := strconv.ParseUint(s, 0, 64)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		return n
	}
	mac := func(s string) net.HardwareAddr {
		a, err := net.ParseMAC(s)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		return a
	}
	for _, kv := range strings.Split(strings.TrimPrefix(m[2], ","), ",") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "":
		case "in_port":
			f.Match = append(f.Match, of.InPort(uint32(num(v))))
		case "dl_vlan":
			f.Match = append(f.Match, of.DlVlan(uint16(num(v))))
		case "vlan_tci":
			if v != "0x0000/0x1fff" {
				t.Fatalf("%q: vlan_tci %s", line, v)
			}
			f.Match = append(f.Match, of.Untagged())
		case "dl_src":
			f.Match = append(f.Match, of.EthSrc(mac(v)))
		case "dl_dst":
			f.Match = append(f.Match, of.EthDst(mac(v)))
		default:
			t.Fatalf("%q: match %q not parsed", line, kv)
		}
	}
	for _, a := range strings.Split(m[3], ",") {
		k, v, _ := strings.Cut(a, ":")
		switch {
		case a == "drop":
		case a == "NORMAL":
			f.Actions = append(f.Actions, of.Output{Port: of.PortNormal})
		case a == "pop_vlan":
			f.Actions = append(f.Actions, of.PopVLAN{})
		case k == "goto_table":
			f.Actions = append(f.Actions, of.GotoTable{Table: uint8(num(v))})
		case k == "output":
			f.Actions = append(f.Actions, of.Output{Port: uint32(num(v))})
		case k == "set_field" && strings.HasSuffix(v, "->eth_src"):
			f.Actions = append(f.Actions, of.SetField{Field: of.EthSrc(mac(strings.TrimSuffix(v, "->eth_src")))})
		case k == "set_field" && strings.HasSuffix(v, "->vlan_vid"): // the base pipeline's VLAN translation (VLAN tenant networks)
			f.Actions = append(f.Actions, of.SetVLANVID(uint16(num(strings.TrimSuffix(v, "->vlan_vid"))&0xfff)))
		case k == "set_field" && strings.HasSuffix(v, "->eth_dst"):
			f.Actions = append(f.Actions, of.SetField{Field: of.EthDst(mac(strings.TrimSuffix(v, "->eth_dst")))})
		default:
			t.Fatalf("%q: action %q not parsed", line, a)
		}
	}
	// the parse is faithful: the flow renders as the capture's line
	if got := f.String(); got != line {
		t.Fatalf("parsed\n%s\nrenders\n%s", line, got)
	}
	return f
}

// Every capture's DVR flows (the reference's cookie) are of forms ovs-agent
// builds: with DVR enabled they are taken over (nothing refused); with it
// off they are refused, per bridge, naming the option.
func TestUnrebuiltTakesReferenceDVROver(t *testing.T) {
	f := NewFeature(Deps{})
	for _, host := range captureHosts {
		h := captureHost(t, host)
		c := Classify(h)
		n := 0
		for _, br := range bridges {
			n += len(h.Flows[br])
		}
		if len(c.Unknown) != 0 || len(c.Rebuilt) != n {
			t.Errorf("%s: %d rebuilt of %d, unknown %v", host, len(c.Rebuilt), n, c.Unknown)
		}
		if got := f.Unrebuilt(h); got != nil {
			t.Errorf("%s: refused with DVR enabled: %q", host, got)
		}
		off := UnrebuiltWithoutDVR(h)
		if len(off) != 1 {
			t.Fatalf("%s: without DVR: %q, want one reason", host, off)
		}
		for _, want := range []string{"on br-int tables 1,2,3,4", "on br-tun tables 1,9", "on br-phys tables 1,2,3", "enable_distributed_routing is off"} {
			if !strings.Contains(off[0], want) {
				t.Errorf("%s: %q lacks %q", host, off[0], want)
			}
		}
	}
}

// Flows of a form ovs-agent does not build, in a DVR table, beside a
// capture's: refused, each named in ovs-ofctl form, however many; the
// capture's own flows still are not. ovs-agent's own cookie is never
// refused (an earlier run's flows are recomputed and swept as its own).
func TestUnrebuiltRefusesUnknownDVRForms(t *testing.T) {
	ref := uint64(0x73d0f8ce2ba76292)
	own := uint64(0x1234)<<16 | feature.OwnCookieTag
	gw := net.HardwareAddr{0xfa, 0x16, 0x3e, 0x31, 0x55, 0x16}
	dvrMAC := net.HardwareAddr{0xfa, 0x16, 0x3f, 0x58, 0x35, 0xbd}
	cases := []struct {
		name string
		br   string
		fl   of.Flow
	}{
		// the DVR_TO_SRC_MAC rewrite also matching IPv4 (an extra field)
		{"extra match field", "br-int", of.Flow{Table: 1, Priority: 20, Match: of.Match{of.DlVlan(1), of.EthDst(gw), of.EthType(of.EthTypeIPv4)},
			Actions: []of.Action{of.SetField{Field: of.EthSrc(gw)}, of.GotoTable{Table: 58}}}},
		// the gateway ARP drop in DVR_PROCESS (before 2026.2 the reference put it there; 2026.2 and ovs-agent use table 22)
		{"gateway ARP drop in table 1", "br-tun", of.Flow{Table: 1, Priority: 3, Match: of.Match{of.DlVlan(1), of.EthType(of.EthTypeARP)}}},
		// ARP_DVR_MAC_TO_DST_MAC delivering by NORMAL, not to the qr- port
		{"other action", "br-int", of.Flow{Table: 3, Priority: 5, Match: of.Match{of.DlVlan(1), of.EthDst(dvrMAC)},
			Actions: []of.Action{of.SetField{Field: of.EthDst(gw)}, of.PopVLAN{}, of.Output{Port: of.PortNormal}}}},
		// DVR_NOT_LEARN_PHYSICAL going on to another table
		{"other goto", "br-phys", of.Flow{Table: 3, Priority: 2, Match: of.Match{of.EthSrc(dvrMAC)}, Actions: []of.Action{of.GotoTable{Table: 4}}}},
		// a priority DVR does not use in that table
		{"other priority", "br-tun", of.Flow{Table: 9, Priority: 7, Match: of.Match{of.EthSrc(dvrMAC)}, Actions: []of.Action{of.Output{Port: 1}}}},
		// learnt flows (timeouts) are no DVR table's
		{"timeouts", "br-int", of.Flow{Table: 2, Priority: 1, HardTimeout: 300}},
	}
	f := NewFeature(Deps{})
	for _, c := range cases {
		for _, cookie := range []uint64{ref, own} {
			h := captureHost(t, "three-hosts/hv2")
			x := c.fl
			x.Cookie = cookie
			h.Flows[c.br] = append(h.Flows[c.br], x)
			got := f.Unrebuilt(h)
			if cookie == own {
				if got != nil {
					t.Errorf("%s, own cookie: refused %q", c.name, got)
				}
				continue
			}
			want := c.br + ":" + strings.TrimSpace(x.String())
			if len(got) != 1 || !strings.Contains(got[0], "1 flows in DVR tables of a form ovs-agent's DVR does not build") || !strings.Contains(got[0], want) {
				t.Errorf("%s: %q, want one reason naming %q", c.name, got, want)
			}
			if u := Classify(h).Unknown; len(u) != 1 {
				t.Errorf("%s: unknown %v, want the added flow alone", c.name, u)
			}
		}
	}
	// many: counted, three shown
	h := captureHost(t, "three-hosts/hv2")
	for i := 0; i < 5; i++ {
		h.Flows["br-int"] = append(h.Flows["br-int"], of.Flow{Cookie: ref, Table: 4, Priority: uint16(30 + i)})
	}
	got := f.Unrebuilt(h)
	if len(got) != 1 || !strings.Contains(got[0], "5 flows in DVR tables") || !strings.Contains(got[0], "and 2 more") {
		t.Errorf("five unknown: %q", got)
	}
}

// A flow of a known form whose values no server state gives any more (the
// reference's stale ARP_DVR_MAC_TO_DST_MAC flow to a removed router
// interface, docs/dvr.md defect 1) is not refused: the start-up sweep
// removes it once the DVR state is complete.
func TestUnrebuiltKeepsStaleReferenceFlowsSweepable(t *testing.T) {
	h := captureHost(t, "three-hosts/hv1")
	stale := of.Flow{Cookie: 0x4c9e79bc0938db1f, Table: 3, Priority: 5,
		Match:   of.Match{of.DlVlan(7), of.EthDst(net.HardwareAddr{0xfa, 0x16, 0x3f, 0x8e, 0x8e, 0x11})},
		Actions: []of.Action{of.SetField{Field: of.EthDst(net.HardwareAddr{0xfa, 0x16, 0x3e, 0, 0, 0x77})}, of.PopVLAN{}, of.Output{Port: 99}}}
	h.Flows["br-int"] = append(h.Flows["br-int"], stale)
	c := Classify(h)
	if len(c.Unknown) != 0 || !slices.ContainsFunc(c.Rebuilt, func(x Found) bool { return x.Flow.Key() == stale.Key() }) {
		t.Fatalf("stale table-3 flow: %+v", c)
	}
	if got := NewFeature(Deps{}).Unrebuilt(h); got != nil {
		t.Fatalf("refused: %q", got)
	}
}

// The forms accepted are those Flows builds (and the pipeline's local VLAN
// translation in br-phys table 2): every flow of the golden states has one.
func TestKnownShapesCoverFlows(t *testing.T) {
	for _, c := range []struct{ dir, hv, host string }{
		{"testdata/2026.2-two-hosts", "hv1", "refhv-2026-2-dvr"},
		{"testdata/2026.2-three-hosts", "hv1", "refhv-2026-2-dvr"},
	} {
		s := captureState(t, c.dir, filepath.Join(c.dir, c.hv), c.host)
		d, err := Flows(s)
		if err != nil {
			t.Fatal(err)
		}
		h := feature.HostState{Layout: captureLayout, Flows: map[string][]of.Flow{"br-int": d.Int, "br-tun": d.Tun, "br-phys": d.Phys["br-phys"]}}
		for br, fs := range h.Flows {
			for i := range fs {
				fs[i].Cookie = 0xabc // another agent's
			}
			h.Flows[br] = fs
		}
		if u := Classify(h).Unknown; len(u) != 0 {
			t.Errorf("%s/%s: Flows' own flows unknown: %v", c.dir, c.hv, u)
		}
	}
	if len(knownShapes()[roleInt]) < 6 || len(knownShapes()[roleTun]) < 5 || len(knownShapes()[rolePhys]) < 8 {
		t.Errorf("shapes %v", knownShapes())
	}
}

// Waiting holds the start-up sweep until this host's DVR MAC and every local
// router interface's subnet are known; a server that does not answer keeps
// it waiting; a subnet the server has no answer for does not.
func TestFeatureWaiting(t *testing.T) {
	f, _, rpc, _ := featureFixture(t, "testdata/2026.2-two-hosts", "hv2", "refhv-2026-2-dvr-hv2")
	if !f.Waiting() {
		t.Fatal("not waiting before the server answered")
	}
	rpc.fail = errorString("MessagingTimeout")
	_ = f.Sync(t.Context())
	if !f.Waiting() {
		t.Fatal("not waiting after a failed Sync")
	}
	rpc.fail = nil
	if err := f.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if f.Waiting() {
		t.Fatal("waiting after the MAC and subnets came")
	}
	// a subnet not answered yet keeps it waiting until Sync asks
	for sid := range f.subnets {
		delete(f.subnets, sid)
		break
	}
	if !f.Waiting() {
		t.Fatal("not waiting with a router interface's subnet unknown")
	}
	for id := range rpc.subnets {
		delete(rpc.subnets, id) // the server answers {}
	}
	if err := f.Sync(t.Context()); err != nil || f.Waiting() {
		t.Fatalf("after {}: %v, waiting %v", err, f.Waiting())
	}
	if NewFeature(Deps{}).Waiting() {
		t.Fatal("a dry run's feature waits")
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }

// The dry run's server side reads this host's MAC from the list and never
// calls get_dvr_mac_address_by_host (which allocates one); a host not in the
// list is an error, not a MAC.
func TestReadOnlyRPC(t *testing.T) {
	f, _, rpc, _ := featureFixture(t, "testdata/2026.2-two-hosts", "hv2", "refhv-2026-2-dvr-hv2")
	ro := ReadOnly{RPC: rpc, Host: "refhv-2026-2-dvr-hv2"}
	me, err := ro.GetDVRMACAddressByHost(t.Context())
	if err != nil || me != rpc.me {
		t.Fatalf("%+v, %v; want %+v", me, err, rpc.me)
	}
	f.d.RPC = ro
	if err := f.Sync(t.Context()); err != nil || !f.InDistributedMode() {
		t.Fatalf("Sync: %v", err)
	}
	if slices.Contains(rpc.calls, "get_dvr_mac_address_by_host") {
		t.Fatalf("calls %v", rpc.calls)
	}
	if _, err := (ReadOnly{RPC: rpc, Host: "elsewhere"}).GetDVRMACAddressByHost(t.Context()); err == nil {
		t.Fatal("a host without a MAC answered")
	}
}
