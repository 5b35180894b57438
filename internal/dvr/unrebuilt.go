package dvr

import (
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/ovsagent/ovsagent/internal/feature"
	of "github.com/ovsagent/ovsagent/internal/openflow"
)

// What a start or takeover finds in DVR's tables, and whether ovs-agent can
// rebuild it.
//
// The flows the reference (or an earlier ovs-agent) installed in the DVR
// tables are a function of the server's state: this host's DVR MAC, the
// other hosts' MACs, the router interfaces, csnat and DVR-serviced ports
// bound here, their subnets' gateways. None of that is known when the check
// runs (the server is asked once the agent runs), and it need not be: the
// agent installs what the server describes next to the found flows and
// sweeps the rest only once the DVR state is complete (Feature.Waiting), so
// a found flow is rebuilt exactly when the server still describes it, and
// one it no longer describes (the reference's stale table-3 flows after an
// interface removal, docs/dvr.md) goes, as it should. So a found flow is
// ovs-agent's to replace when it has the form of a flow ovs-agent builds:
// its table, priority, the fields it matches and its actions, the values
// (MACs, VLANs, ports) left out. A flow of any other form in a DVR table is
// something ovs-agent does not know the purpose of: it would be swept and
// never put back, so it is refused, named, for the operator to decide.

// Tables DVR writes to on each bridge (neutron_lib ovs_constants): the
// one list of them (internal/agent's check without DVR reads it too).
var (
	IntTables  = []uint8{intDVRToSrcMAC, intDVRToSrcMACPhysical, intARPDVRMACToDstMAC, intARPDVRMACToDstMACPhys}
	TunTables  = []uint8{tunDVRProcess, tunDVRNotLearn}
	PhysTables = []uint8{physDVRProcess, physLocalVLANTranslation, physDVRNotLearn}
)

// role is which of DVR's bridges a flow is on.
type role int

const (
	roleInt role = iota
	roleTun
	rolePhys
)

func (r role) tables() []uint8 {
	switch r {
	case roleInt:
		return IntTables
	case roleTun:
		return TunTables
	}
	return PhysTables
}

// Found is a flow in a DVR table with another agent's cookie.
type Found struct {
	Bridge string
	Flow   of.Flow
}

func (f Found) String() string { return f.Bridge + ":" + f.Flow.String() }

// Findings sorts the foreign flows in DVR's tables.
type Findings struct {
	// Rebuilt have the form of a flow ovs-agent builds with DVR: replaced at
	// start by what the server's state gives, or swept when it gives none.
	Rebuilt []Found
	// Unknown have a form ovs-agent never builds.
	Unknown []Found
}

// Classify reads the flows of the layout's bridges in DVR's tables that
// carry another agent's cookie (ovs-agent's own, of an earlier run, are
// recomputed like any of its flows) and sorts them by form.
func Classify(h feature.HostState) Findings {
	var out Findings
	shapes := knownShapes()
	look := func(br string, r role) {
		if br == "" {
			return
		}
		for _, fl := range h.Flows[br] {
			if feature.OwnCookie(fl.Cookie) || !slices.Contains(r.tables(), fl.Table) {
				continue
			}
			x := Found{Bridge: br, Flow: fl}
			if shapes[r][shape(fl)] {
				out.Rebuilt = append(out.Rebuilt, x)
			} else {
				out.Unknown = append(out.Unknown, x)
			}
		}
	}
	look(h.Layout.Integration, roleInt)
	look(h.Layout.Tunnel, roleTun)
	for _, pn := range slices.Sorted(maps.Keys(h.Layout.Physical)) {
		look(h.Layout.Physical[pn].Bridge, rolePhys)
	}
	return out
}

// Unrebuilt implements feature.Takeover: with DVR enabled, the reference's
// DVR flows are taken over like the rest of its flows (ours installed beside
// them, theirs swept once the DVR state is complete); refused are only the
// flows in DVR's tables of a form ovs-agent does not build, each named.
func (f *Feature) Unrebuilt(h feature.HostState) []string {
	u := Classify(h).Unknown
	if len(u) == 0 {
		return nil
	}
	const show = 3
	var ex []string
	for i, x := range u {
		if i == show {
			ex = append(ex, fmt.Sprintf("and %d more", len(u)-show))
			break
		}
		ex = append(ex, x.Bridge+":"+strings.TrimSpace(x.Flow.String()))
	}
	return []string{fmt.Sprintf("%d flows in DVR tables of a form ovs-agent's DVR does not build (%s): they would be deleted and not rebuilt; "+
		"find out what installed them, delete them if nothing needs them (ovs-ofctl del-flows --strict), then start again", len(u), strings.Join(ex, "; "))}
}

// UnrebuiltWithoutDVR is the check of a host when ovs-agent runs without
// enable_distributed_routing: any flow in DVR's tables (another agent's or
// an earlier ovs-agent's with DVR) would be deleted and never rebuilt.
func UnrebuiltWithoutDVR(h feature.HostState) []string {
	var dvr []string
	count := func(br string, r role) {
		if br == "" {
			return
		}
		n := 0
		for _, fl := range h.Flows[br] {
			if slices.Contains(r.tables(), fl.Table) {
				n++
			}
		}
		if n > 0 {
			dvr = append(dvr, fmt.Sprintf("%d on %s tables %s", n, br, tableList(r.tables())))
		}
	}
	count(h.Layout.Integration, roleInt)
	count(h.Layout.Tunnel, roleTun)
	for _, pn := range slices.Sorted(maps.Keys(h.Layout.Physical)) {
		count(h.Layout.Physical[pn].Bridge, rolePhys)
	}
	if len(dvr) == 0 {
		return nil
	}
	return []string{"DVR flows (" + strings.Join(dvr, ", ") + "): [agent] enable_distributed_routing is off in ovs-agent's configuration, " +
		"so it would delete them and not rebuild them; set it as the agent that installed them had it"}
}

func tableList(ts []uint8) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = fmt.Sprint(t)
	}
	return strings.Join(s, ",")
}

// shape is a flow's form: table, priority, timeouts, the fields it matches
// (with the values of protocol constants, without the values the server's
// state gives: MACs, VLANs, addresses, ports) and its actions (with goto
// targets and reserved ports, without values).
func shape(f of.Flow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "t%d p%d", f.Table, f.Priority)
	if f.IdleTimeout != 0 || f.HardTimeout != 0 {
		b.WriteString(" timeouts")
	}
	m := append(of.Match(nil), f.Match...)
	sort.Slice(m, func(i, j int) bool {
		if m[i].Field != m[j].Field {
			return m[i].Field < m[j].Field
		}
		return m[i].Reg < m[j].Reg
	})
	b.WriteString(" match")
	for _, x := range m {
		switch x.Field {
		case of.FieldVlanTCI:
			full := uint64(of.VlanPresent | of.VlanVIDMask)
			switch {
			case x.HasMask && x.Mask == full && x.Value&of.VlanPresent != 0:
				b.WriteString(" dl_vlan")
			case x.HasMask && x.Mask == full && x.Value == 0:
				b.WriteString(" untagged")
			default:
				fmt.Fprintf(&b, " vlan_tci=%#x/%#x", x.Value, x.Mask)
			}
		case of.FieldEthType, of.FieldIPProto, of.FieldARPOp, of.FieldICMPv4Type, of.FieldICMPv6Type:
			fmt.Fprintf(&b, " f%d=%#x", x.Field, x.Value)
		default:
			fmt.Fprintf(&b, " f%d.%d", x.Field, x.Reg)
			if x.HasMask {
				b.WriteString("/m")
			}
		}
	}
	b.WriteString(" actions")
	for _, a := range f.Actions {
		switch a := a.(type) {
		case of.Drop:
			// the same as no action
		case of.Output:
			if a.Port >= of.PortInPort {
				fmt.Fprintf(&b, " output:%#x", a.Port)
			} else {
				b.WriteString(" output")
			}
		case of.GotoTable:
			fmt.Fprintf(&b, " goto:%d", a.Table)
		case of.SetField:
			fmt.Fprintf(&b, " set:f%d", a.Field.Field)
		case of.Load:
			if a.Dst.NBits != 0 || a.Dst.Ofs != 0 {
				fmt.Fprintf(&b, " load:f%d[%d+%d]", a.Dst.Field, a.Dst.Ofs, a.Dst.NBits)
			} else {
				fmt.Fprintf(&b, " set:f%d", a.Dst.Field) // a whole-field load is a set_field
			}
		case of.PopVLAN:
			b.WriteString(" pop_vlan")
		case of.PushVLAN:
			fmt.Fprintf(&b, " push_vlan:%#x", a.EtherType)
		default:
			fmt.Fprintf(&b, " %T", a)
		}
	}
	return b.String()
}

// knownShapes are the forms of every flow ovs-agent builds in DVR's tables:
// Flows of a state that takes every branch (a tunnelled, a VLAN and a flat
// network, IPv4 and IPv6 router interfaces, csnat and DVR-serviced ports
// with an address pair, another host), so the set follows Flows as it
// changes; and the base pipeline's local VLAN translation, which DVR moves
// into br-phys table 2 (internal/pipeline physTranslationFlow).
var knownShapes = sync.OnceValue(func() map[role]map[string]bool {
	mac := func(b byte) net.HardwareAddr { return net.HardwareAddr{0xfa, 0x16, 0x3e, 0, 0, b} }
	s := &State{
		Config:   Config{Tunneling: true},
		Bridges:  Bridges{IntPatchTun: 2, TunPatchInt: 1, Phys: map[string]PhysPatch{"physnet1": {Bridge: "br-phys", IntOfport: 3, PhysOfport: 1}}},
		LocalMAC: net.HardwareAddr{0xfa, 0x16, 0x3f, 0, 0, 1},
		Others:   []net.HardwareAddr{{0xfa, 0x16, 0x3f, 0, 0, 2}},
		Networks: map[string]*Network{
			"vx": {Type: "vxlan", LocalVLAN: 1},
			"vl": {Type: "vlan", PhysicalNetwork: "physnet1", SegmentationID: 100, LocalVLAN: 2},
			"fl": {Type: "flat", PhysicalNetwork: "physnet1", LocalVLAN: 3},
		},
		Subnets: map[string]*Subnet{},
	}
	ofport := uint32(10)
	add := func(id, network, cidr string) {
		pfx := netip.MustParsePrefix(cidr)
		gw := pfx.Addr().Next()
		ri := mac(byte(ofport))
		s.Subnets[id] = &Subnet{ID: id, NetworkID: network, CIDR: pfx, GatewayIP: gw, GatewayMAC: ri}
		vm := gw.Next()
		s.Ports = append(s.Ports,
			&Port{ID: "ri-" + id, Kind: KindRouterInterface, NetworkID: network, Ofport: ofport, MAC: ri, FixedIPs: []FixedIP{{id, gw}}},
			&Port{ID: "sg-" + id, Kind: KindCentralizedSNAT, NetworkID: network, Ofport: ofport + 1, MAC: mac(byte(ofport + 1)), FixedIPs: []FixedIP{{id, gw.Next().Next()}}},
			&Port{ID: "vm-" + id, Kind: KindServiced, NetworkID: network, Ofport: ofport + 2, MAC: mac(byte(ofport + 2)), FixedIPs: []FixedIP{{id, vm}},
				Pairs: []AddressPair{{IP: netip.PrefixFrom(vm.Next().Next().Next(), vm.BitLen()), MAC: mac(byte(ofport + 3))}}})
		ofport += 4
	}
	add("vx4", "vx", "10.0.1.0/24")
	add("vx6", "vx", "fd00:1::/64")
	add("vl4", "vl", "10.0.2.0/24")
	add("fl4", "fl", "10.0.3.0/24")
	d, err := Flows(s)
	if err != nil {
		panic("dvr: the shapes' state: " + err.Error()) // a bug of this file, found by its tests
	}
	out := map[role]map[string]bool{roleInt: {}, roleTun: {}, rolePhys: {}}
	put := func(r role, fs []of.Flow) {
		for _, fl := range fs {
			if slices.Contains(r.tables(), fl.Table) {
				out[r][shape(fl)] = true
			}
		}
	}
	put(roleInt, d.Int)
	put(roleTun, d.Tun)
	put(rolePhys, d.Phys["br-phys"])
	lv := of.Match{of.InPort(1), of.DlVlan(2)}
	put(rolePhys, []of.Flow{
		flow(physLocalVLANTranslation, 4, lv, of.PopVLAN{}, output(of.PortNormal)),       // flat
		flow(physLocalVLANTranslation, 4, lv, of.SetVLANVID(100), output(of.PortNormal)), // vlan
	})
	return out
})
