package firewall

import (
	"net"
	"net/netip"

	of "github.com/ovsagent/ovsagent/internal/openflow"
)

// ICMPv6 types the reference lets through (neutron/agent/firewall.py).
var (
	icmp6AllowedEgress    = []uint8{130, 133, 135} // MLD query, RS, NS
	icmp6RestrictedEgress = []uint8{136}           // NA: only for our own targets
	icmp6AllowedIngress   = []uint8{130, 135, 136, 134}
)

const icmp6RA = 134

type macIP struct {
	mac net.HardwareAddr
	ip  netip.Prefix
}

// portView is a port with its derived address sets.
type portView struct {
	Port
	stateless bool
	macs      []net.HardwareAddr // port MAC first, then AAP MACs
	v4, v6    []macIP            // allowed (MAC, IP) pairs; v6 includes (MAC, LLA)
}

func newPortView(p Port, stateless bool) portView {
	v := portView{Port: p, stateless: stateless}
	v.macs = append(v.macs, p.MAC)
	seenMAC := map[string]bool{p.MAC.String(): true}
	seenPair := map[string]bool{}
	// An IPv4-mapped IPv6 pair stays IPv6 (the reference files pairs by
	// netaddr's version): unmapping it gave a /128 IPv4 prefix, which is
	// invalid and matched every source.
	addPair := func(mac net.HardwareAddr, ip netip.Prefix) {
		ip = ip.Masked()
		if !ip.IsValid() {
			return
		}
		k := mac.String() + "|" + ip.String()
		if seenPair[k] {
			return
		}
		seenPair[k] = true
		if ip.Addr().Is4() {
			v.v4 = append(v.v4, macIP{mac, ip})
		} else {
			v.v6 = append(v.v6, macIP{mac, ip})
		}
	}
	for _, ip := range p.FixedIPs {
		addPair(p.MAC, hostPrefix(ip))
	}
	addPair(p.MAC, hostPrefix(linkLocal(p.MAC)))
	for _, ap := range p.AllowedAddressPairs {
		mac := ap.MAC
		if len(mac) == 0 {
			mac = p.MAC
		}
		if ap.Invalid != "" || !ap.IP.IsValid() {
			continue
		}
		if !seenMAC[mac.String()] {
			seenMAC[mac.String()] = true
			v.macs = append(v.macs, mac)
		}
		addPair(mac, ap.IP)
	}
	return v
}

// portStateless: Neutron refuses to mix stateful and stateless groups on a
// port, so a port is stateless when it has groups and none is stateful.
func portStateless(p Port, groups map[string]SecurityGroup) bool {
	if len(p.SecurityGroupIDs) == 0 {
		return false
	}
	for _, id := range p.SecurityGroupIDs {
		g, ok := groups[id]
		if !ok || !g.Stateless {
			return false
		}
	}
	return true
}

// srcIP / dstIP give the IPv4/IPv6 address match for a prefix, nil for /0.
func srcIP(p netip.Prefix) (of.MatchField, bool) {
	if !p.IsValid() || p.Bits() == 0 {
		return of.MatchField{}, false
	}
	if p.Addr().Is4() {
		return of.IPv4Src(p), true
	}
	return of.IPv6Src(p), true
}

func dstIP(p netip.Prefix) (of.MatchField, bool) {
	if !p.IsValid() || p.Bits() == 0 {
		return of.MatchField{}, false
	}
	if p.Addr().Is4() {
		return of.IPv4Dst(p), true
	}
	return of.IPv6Dst(p), true
}

func udpPorts(src, dst uint16) []of.MatchField {
	return []of.MatchField{of.UDPSrc(src, 0xffff), of.UDPDst(dst, 0xffff)}
}

// PortFlows returns every flow of one port in tables 71-94 (owner
// OwnerPort(p.ID)). ids must hold the conjunction ids of the port's remote
// group rules (AssignConjIDs); rules whose id is missing are left out.
func PortFlows(st *State, p Port, ids ConjIDs) []of.Flow {
	return portFlows(st, p, ids, newRulesIndex(st))
}

func portFlows(st *State, p Port, ids ConjIDs, idx *rulesIndex) []of.Flow {
	b := &flowSet{}
	if !p.PortSecurity {
		// Pass-through: table 60 sends the port's traffic straight to 73.
		b.add(flow(TableAcceptOrIngress, 80, of.Match{regPort(p.OFPort)}, resubmit(TableAcceptedEgressNormal)))
		egressDirect(b, p, st.Config)
		return b.flows
	}
	rs := idx.forPort(p)
	v := newPortView(p, rs.stateless)
	egressBase(b, v, st.Config)
	acceptOrIngress(b, v, idx)
	ingressBase(b, v, st.Config)
	if !v.stateless {
		tracked(b, v, st.Config)
	}
	ruleFlows(b, v, rs, ids)
	egressDirect(b, p, st.Config)
	return b.flows
}

// egressDirect is install_accepted_egress_direct_flow: with
// explicitly_egress_direct, table 94 delivers to the port's MAC directly
// and sends its unicast out of the network's patch port, tagged.
func egressDirect(b *flowSet, p Port, cfg Config) {
	if !cfg.ExplicitlyEgressDirect {
		return
	}
	b.add(flow(TableAcceptedEgressNormal, 12, of.Match{regNet(p.VLAN), of.EthDst(p.MAC)}, of.Output{Port: p.OFPort}))
	b.add(flow(TableAcceptedEgressNormal, 12, of.Match{of.DlVlan(p.VLAN), of.EthDst(p.MAC)}, of.PopVLAN{}, of.Output{Port: p.OFPort}))
	if p.EgressDirectPatch != 0 {
		// The reference writes mod_vlan_vid:L; OVS stores it for an
		// untagged VM frame as push_vlan + set_field (as internal/pipeline does).
		b.add(flow(TableAcceptedEgressNormal, 10,
			of.Match{regNet(p.VLAN), of.EthSrc(p.MAC), of.EthDstMasked(net.HardwareAddr{0, 0, 0, 0, 0, 0}, net.HardwareAddr{1, 0, 0, 0, 0, 0})},
			of.PushVLAN{EtherType: of.EthTypeVLAN}, of.SetVLANVID(p.VLAN), of.Output{Port: p.EgressDirectPatch}))
	}
}

func egressBase(b *flowSet, v portView, cfg Config) {
	P := v.OFPort
	port := func(extra ...of.MatchField) of.Match {
		return append(of.Match{regPort(P), of.InPort(P)}, extra...)
	}
	toRules := ctRecirc(TableRulesEgress)
	if v.stateless {
		toRules = resubmit(TableRulesEgress)
	}
	for _, pr := range v.v4 {
		b.add(flow(TableBaseEgress, 95, port(of.EthType(of.EthTypeARP), of.EthSrc(pr.mac), of.ARPSpa(pr.ip)), resubmit(TableAcceptedEgressNormal)))
		// RARP from the port's own MACs passes (neutron 24.0.0/2024.1): a
		// hypervisor announces a live-migrated VM with RARP, and without
		// this flow table 71's priority-10 drop took it. One flow per MAC
		// that has an IPv4 pair, as the reference (the set drops repeats).
		b.add(flow(TableBaseEgress, 95, port(of.EthType(of.EthTypeRARP), of.EthSrc(pr.mac)), resubmit(TableAcceptedEgressNormal)))
		b.add(flow(TableBaseEgress, 65, port(of.EthType(of.EthTypeIPv4), of.EthSrc(pr.mac), of.IPv4Src(pr.ip)), toRules))
	}
	for _, pr := range v.v6 {
		for _, t := range icmp6AllowedEgress {
			b.add(flow(TableBaseEgress, 95, port(of.EthType(of.EthTypeIPv6), of.IPProto(of.IPProtoICMPv6), of.ICMP6Type(t), of.EthSrc(pr.mac), of.IPv6Src(pr.ip)), resubmit(TableAcceptedEgressNormal)))
		}
		for _, t := range icmp6RestrictedEgress {
			b.add(flow(TableBaseEgress, 95, port(of.EthType(of.EthTypeIPv6), of.IPProto(of.IPProtoICMPv6), of.ICMP6Type(t), ndTarget(pr.ip)), resubmit(TableAcceptedEgressNormal)))
		}
		b.add(flow(TableBaseEgress, 65, port(of.EthType(of.EthTypeIPv6), of.EthSrc(pr.mac), of.IPv6Src(pr.ip)), toRules))
	}
	// DHCP and DHCPv6 client requests, including DISCOVER from 0.0.0.0.
	v4 := append(append([]macIP(nil), v.v4...), macIP{v.MAC, netip.PrefixFrom(netip.IPv4Unspecified(), 32)})
	for _, pr := range v4 {
		b.add(flow(TableBaseEgress, 80, port(append([]of.MatchField{of.EthType(of.EthTypeIPv4), of.IPProto(of.IPProtoUDP), of.EthSrc(pr.mac), of.IPv4Src(pr.ip)}, udpPorts(68, 67)...)...), resubmit(TableAcceptOrIngress)))
	}
	for _, pr := range v.v6 {
		b.add(flow(TableBaseEgress, 80, port(append([]of.MatchField{of.EthType(of.EthTypeIPv6), of.IPProto(of.IPProtoUDP), of.EthSrc(pr.mac), of.IPv6Src(pr.ip)}, udpPorts(546, 547)...)...), resubmit(TableAcceptOrIngress)))
	}
	// No DHCP server and no router advertisements from a VM.
	b.add(flow(TableBaseEgress, 70, port(append([]of.MatchField{of.EthType(of.EthTypeIPv4), of.IPProto(of.IPProtoUDP)}, udpPorts(67, 68)...)...), resubmit(TableDroppedTraffic)))
	b.add(flow(TableBaseEgress, 70, port(append([]of.MatchField{of.EthType(of.EthTypeIPv6), of.IPProto(of.IPProtoUDP)}, udpPorts(547, 546)...)...), resubmit(TableDroppedTraffic)))
	b.add(flow(TableBaseEgress, 70, port(of.EthType(of.EthTypeIPv6), of.IPProto(of.IPProtoICMPv6), of.ICMP6Type(icmp6RA)), resubmit(TableDroppedTraffic)))
	for _, et := range cfg.PermittedEthertypes {
		b.add(flow(TableBaseEgress, 95, of.Match{regPort(P), of.EthType(et)}, resubmit(TableAcceptedEgressNormal)))
	}
	b.add(flow(TableBaseEgress, 10, port(), of.CtClear{}, resubmit(TableDroppedTraffic)))
}

// ndTarget matches an NA target; a prefix target (an allowed address pair
// CIDR) is a masked nd_target.
func ndTarget(p netip.Prefix) of.MatchField {
	m := of.IPv6Dst(p)
	m.Field = of.FieldNDTarget
	return m
}

func acceptOrIngress(b *flowSet, v portView, idx *rulesIndex) {
	P := v.OFPort
	for _, mac := range v.macs {
		if !idx.macWinner(v.Port, mac) {
			continue
		}
		b.add(flow(TableAcceptOrIngress, 100, of.Match{regNet(v.VLAN), of.EthDst(mac)}, of.SetReg(RegPort, P), resubmit(TableBaseIngress)))
	}
	if !v.stateless {
		for _, et := range []uint16{of.EthTypeIPv4, of.EthTypeIPv6} {
			b.add(flow(TableAcceptOrIngress, 90, of.Match{ctNewNotEst, of.EthType(et), regPort(P)}, ctCommitted, resubmit(TableAcceptedEgressTraffic)))
		}
	}
	b.add(flow(TableAcceptOrIngress, 80, of.Match{regPort(P)}, resubmit(TableAcceptedEgressNormal)))
}

func ingressBase(b *flowSet, v portView, cfg Config) {
	P := v.OFPort
	out := of.Output{Port: P}
	b.add(flow(TableBaseIngress, 100, of.Match{of.EthType(of.EthTypeARP), regPort(P)}, out))
	for _, et := range cfg.PermittedEthertypes {
		b.add(flow(TableBaseIngress, 100, of.Match{of.EthType(et), regPort(P)}, out))
	}
	for _, t := range icmp6AllowedIngress {
		b.add(flow(TableBaseIngress, 100, of.Match{of.EthType(of.EthTypeIPv6), of.IPProto(of.IPProtoICMPv6), regPort(P), of.ICMP6Type(t)}, out))
	}
	b.add(flow(TableBaseIngress, 95, append(of.Match{of.EthType(of.EthTypeIPv4), of.IPProto(of.IPProtoUDP), regPort(P)}, udpPorts(67, 68)...), out))
	b.add(flow(TableBaseIngress, 95, append(of.Match{of.EthType(of.EthTypeIPv6), of.IPProto(of.IPProtoUDP), regPort(P)}, udpPorts(547, 546)...), out))
	if v.stateless {
		b.add(flow(TableBaseIngress, 80, of.Match{regPort(P)}, resubmit(TableRulesIngress)))
		return
	}
	for _, et := range []uint16{of.EthTypeIPv4, of.EthTypeIPv6} {
		b.add(flow(TableBaseIngress, 90, of.Match{ctNotTracked, of.EthType(et), regPort(P)}, ctRecirc(TableRulesIngress)))
	}
	b.add(flow(TableBaseIngress, 80, of.Match{ctTracked, regPort(P)}, resubmit(TableRulesIngress)))
}

// tracked is the conntrack bookkeeping of 72 and 82 for a stateful port:
// replies and related packets of committed connections pass, connections
// marked invalid (ct_mark=1) drop, and an established connection that no
// rule accepts any more is marked invalid so that its next packet drops.
func tracked(b *flowSet, v portView, cfg Config) {
	P := v.OFPort
	// With hardware offload (and no explicitly_egress_direct) the reference
	// delivers replies by NORMAL so the datapath flow is not a flood:
	// "mod_vlan_vid:L,normal", which OVS stores as push_vlan + set_field
	// for the untagged frame.
	replyIn := []of.Action{of.Output{Port: P}}
	if cfg.HWOffload && !cfg.ExplicitlyEgressDirect {
		replyIn = []of.Action{of.PushVLAN{EtherType: of.EthTypeVLAN}, of.SetVLANVID(v.VLAN), of.Output{Port: of.PortNormal}}
	}
	for _, d := range []struct {
		table  uint8
		accept []of.Action
	}{
		{TableRulesEgress, []of.Action{resubmit(TableAcceptedEgressNormal)}},
		{TableRulesIngress, replyIn},
	} {
		b.add(flow(d.table, 50, of.Match{of.CtMark(ctMarkInvalid, 0xffffffff), regPort(P)}, resubmit(TableDroppedTraffic)))
		for _, st := range []of.MatchField{ctEstReply, ctRelated} {
			b.add(flow(d.table, 50, of.Match{st, of.CtZone(v.VLAN), of.CtMark(ctMarkNormal, 0xffffffff), regPort(P)}, d.accept...))
		}
		b.add(flow(d.table, 40, of.Match{ctNotEstablished, regPort(P)}, resubmit(TableDroppedTraffic)))
		for _, et := range []uint16{of.EthTypeIPv4, of.EthTypeIPv6} {
			b.add(flow(d.table, 40, of.Match{ctEstablished, of.EthType(et), regPort(P)}, ctCommitInvalid))
		}
	}
}

// flowSet collects flows, dropping exact duplicates (two rules that expand to
// the same match would otherwise give OpenFlow the same entry twice). It
// keys entries by an order-independent hash of (table, priority, match) and
// compares on collision, so adding allocates nothing but the slice.
type flowSet struct {
	flows []of.Flow
	seen  map[uint64][]int
}

func (s *flowSet) add(f of.Flow) {
	if s.seen == nil {
		s.seen = make(map[uint64][]int, 128)
		s.flows = make([]of.Flow, 0, 128)
	}
	h := entryHash(f)
	for _, i := range s.seen[h] {
		if sameEntry(s.flows[i], f) {
			return
		}
	}
	s.seen[h] = append(s.seen[h], len(s.flows))
	s.flows = append(s.flows, f)
}

func mix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

func fieldHash(m of.MatchField) uint64 {
	h := mix(uint64(m.Field)<<8 | uint64(m.Reg) | 1<<40)
	h = mix(h ^ m.Value)
	if m.HasMask {
		h = mix(h ^ m.Mask ^ 1<<63)
	}
	return mix(h ^ m.ValueHi ^ m.MaskHi<<1) // high halves of 128-bit fields
}

// entryHash is commutative over the match fields: field order does not
// matter to OpenFlow.
func entryHash(f of.Flow) uint64 {
	var sum uint64
	for _, m := range f.Match {
		sum += fieldHash(m)
	}
	return mix(sum ^ uint64(f.Table)<<16 ^ uint64(f.Priority))
}

func sameEntry(a, b of.Flow) bool {
	if a.Table != b.Table || a.Priority != b.Priority || len(a.Match) != len(b.Match) {
		return false
	}
	for _, x := range a.Match {
		found := false
		for _, y := range b.Match {
			if x == y {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
