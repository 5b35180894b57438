package pipeline

import (
	"net"
	"net/netip"
	"sort"

	of "github.com/ovsagent/ovsagent/internal/openflow"
)

// flow builds one flow; the small feature functions below read like the
// reference's install_goto / install_drop / install_apply_actions calls.
func flow(t Table, prio uint16, m of.Match, acts ...of.Action) of.Flow {
	return of.Flow{Table: t.ID, Priority: prio, Match: m, Actions: acts}
}

func gotoT(t Table) of.GotoTable                            { return of.GotoTable{Table: t.ID} }
func resubmit(t Table) of.Resubmit                          { return of.ResubmitTable(t.ID) }
func output(port uint32) of.Output                          { return of.Output{Port: port} }
func normal() of.Output                                     { return of.Output{Port: of.PortNormal} }
func pushVLAN() of.PushVLAN                                 { return of.PushVLAN{EtherType: of.EthTypeVLAN} }
func setVLAN(vid uint16) of.SetField                        { return of.SetVLANVID(vid) }
func arpMatch() of.MatchField                               { return of.EthType(of.EthTypeARP) }
func ipv6Match() of.MatchField                              { return of.EthType(of.EthTypeIPv6) }
func icmp6Match() of.MatchField                             { return of.IPProto(of.IPProtoICMPv6) }
func drop(t Table, prio uint16, m ...of.MatchField) of.Flow { return flow(t, prio, m) }

// Multicast / unicast halves of the destination MAC space.
var (
	macZero      = net.HardwareAddr{0, 0, 0, 0, 0, 0}
	macMulticast = net.HardwareAddr{1, 0, 0, 0, 0, 0}
	macBroadcast = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
)

func unicastDst() of.MatchField   { return of.EthDstMasked(macZero, macMulticast) }
func multicastDst() of.MatchField { return of.EthDstMasked(macMulticast, macMulticast) }

// intBaseFlows is setup_default_table of br-int (neutron 2026.2) plus the
// explicitly_egress_direct goto for patch-tun.
func intBaseFlows(s *State) []of.Flow {
	fs := []of.Flow{
		flow(IntCanary, 0, nil),
		drop(IntLocalSwitching, prioMax, of.DlVlan(DeadVLAN)),
		flow(IntLocalSwitching, 0, nil, gotoT(IntPacketRateLimit)),
		// 2023.2 put a bandwidth-limit table (59) between the packet-rate
		// table (now 58) and 60; without QoS both only pass traffic on.
		flow(IntPacketRateLimit, 0, nil, gotoT(IntBandwidthRateLimit)),
		flow(IntBandwidthRateLimit, 0, nil, gotoT(IntTransient)),
		// Priority 1 since 2024.2 (Zed 21.0.0: 3), so that the OVS
		// firewall's priority-2 "resubmit(,94)" of explicitly_egress_direct
		// takes what no port flow claims.
		flow(IntTransient, 1, nil, normal()),
		drop(IntARPSpoof, 0),
		flow(IntTransientEgress, 3, nil, normal()),
		flow(IntLocalEgress, 0, nil, gotoT(IntPacketRateLimit)),
		flow(IntLocalIP, 0, nil, gotoT(IntPacketRateLimit)),
	}
	if s.Config.egressDirect() {
		if s.Tun != nil && s.Int.PatchTunOfport != 0 {
			fs = append(fs, flow(IntTransient, 4, of.Match{of.InPort(s.Int.PatchTunOfport)}, gotoT(IntLocalMACDirect)))
		}
		fs = append(fs, flow(IntLocalMACDirect, 0, nil, gotoT(IntTransientEgress)))
	}
	return fs
}

// intPhysnetFlows: frames from a physical network that no VLAN translation
// claimed are dropped (this stops loops between physical networks).
func intPhysnetFlows(s *State, pb *PhysBridge) []of.Flow {
	fs := []of.Flow{drop(IntLocalSwitching, 2, of.InPort(pb.IntOfport))}
	if s.Config.egressDirect() {
		fs = append(fs, flow(IntTransient, 4, of.Match{of.InPort(pb.IntOfport)}, gotoT(IntLocalMACDirect)))
	}
	return fs
}

// intTranslationFlow maps a provider VLAN (or untagged, for flat) arriving
// from int-X to the local VLAN.
func intTranslationFlow(s *State, pb *PhysBridge, n *Network) of.Flow {
	if n.Type == TypeFlat || !n.Key.HasSeg {
		return flow(IntLocalSwitching, 3, of.Match{of.InPort(pb.IntOfport), of.Untagged()},
			pushVLAN(), setVLAN(n.LocalVLAN), gotoT(IntPacketRateLimit))
	}
	return flow(IntLocalSwitching, 3, of.Match{of.InPort(pb.IntOfport), of.DlVlan(uint16(n.Key.SegID))},
		setVLAN(n.LocalVLAN), gotoT(IntPacketRateLimit))
}

// portNetwork returns the network a live port is bound to, or nil when the
// port must be treated as dead.
func portNetwork(s *State, p *Port) *Network {
	if p.Dead || !p.AdminUp {
		return nil
	}
	n := s.Networks[p.Net]
	if n == nil || n.LocalVLAN == 0 || n.LocalVLAN >= DeadVLAN || !n.segmentOK() {
		return nil
	}
	return n
}

// intPortFlows are all br-int flows of one VIF.
func intPortFlows(s *State, p *Port) []of.Flow {
	if p.Ofport == 0 || p.Ofport >= 0xffffff00 {
		return nil // not in the datapath (ofport [] or -1)
	}
	n := portNetwork(s, p)
	if n == nil {
		return []of.Flow{deadPortFlow(p.Ofport)}
	}
	var fs []of.Flow
	if s.Config.OVSFirewall() {
		fs = firewallEntryFlows(s, p, n)
	} else if p.Filtered() {
		fs = antiSpoofFlows(p)
	}
	if s.Config.egressDirect() {
		fs = append(fs, egressDirectFlows(s, p, n)...)
	}
	return fs
}

// deadPortFlow is port_dead's drop (priority 2, the same slot as int-X).
func deadPortFlow(ofport uint32) of.Flow {
	return drop(IntLocalSwitching, 2, of.InPort(ofport))
}

// firewallEntryFlows are the OVS firewall's table-60 flows that steer a
// port's traffic into the firewall tables (initialize_port_flows and
// _initialize_egress_no_port_security). Everything in 71-94 is internal/firewall's.
func firewallEntryFlows(s *State, p *Port, n *Network) []of.Flow {
	regs := []of.Action{of.SetReg(RegPort, p.Ofport), of.SetReg(RegNet, uint32(n.LocalVLAN))}
	egress := func(next Table) of.Flow {
		return flow(IntTransient, 100, of.Match{of.InPort(p.Ofport)}, append(cloneActs(regs), resubmit(next))...)
	}
	if !p.Filtered() {
		return []of.Flow{egress(IntAcceptOrIngress)}
	}
	fs := []of.Flow{egress(IntBaseEgress)}
	for i, mac := range p.allowedMACs() {
		if i > 0 && !winsAAPMAC(s, p, mac) {
			continue
		}
		switch {
		case n.Type == TypeVLAN && n.Key.HasSeg:
			fs = append(fs, flow(IntTransient, 90, of.Match{of.DlVlan(uint16(n.Key.SegID)), of.EthDst(mac)},
				append(cloneActs(regs), of.PopVLAN{}, resubmit(IntBaseIngress))...))
		case n.Type == TypeFlat:
			fs = append(fs, flow(IntTransient, 90, of.Match{of.Untagged(), of.EthDst(mac)},
				append(cloneActs(regs), resubmit(IntBaseIngress))...))
		}
		fs = append(fs, flow(IntTransient, 90, of.Match{of.DlVlan(n.LocalVLAN), of.EthDst(mac)},
			append(cloneActs(regs), of.PopVLAN{}, resubmit(IntBaseIngress))...))
	}
	return fs
}

// winsAAPMAC decides which port gets the table-60 ingress flows for a MAC
// that p lists in its allowed address pairs, when other ports of the same
// network list it too (VRRP/keepalived pairs do this): a port whose own MAC
// it is wins, then the lowest ofport, then the smallest port id. The
// reference installs the flow for every claimant (last writer wins) and
// deletes it for all when any of them goes away.
func winsAAPMAC(s *State, p *Port, mac net.HardwareAddr) bool {
	for _, o := range s.Ports {
		if o == p || o.Net != p.Net || o.Ofport == 0 || portNetwork(s, o) == nil {
			continue
		}
		if o.Filtered() {
			for j, m := range o.allowedMACs() {
				if !macEqual(m, mac) {
					continue
				}
				if j == 0 || o.Ofport < p.Ofport || (o.Ofport == p.Ofport && o.ID < p.ID) {
					return false
				}
			}
		}
	}
	return true
}

// sharesAAPMAC reports whether o's allowed MACs and p's AAP MACs intersect.
func sharesAAPMAC(p, o *Port) bool {
	pm := p.allowedMACs()
	if len(pm) < 2 && len(o.allowedMACs()) < 2 {
		return false
	}
	for _, a := range pm {
		for _, b := range o.allowedMACs() {
			if macEqual(a, b) {
				return true
			}
		}
	}
	return false
}

func cloneActs(a []of.Action) []of.Action { return append([]of.Action(nil), a...) }

// antiSpoofFlows is setup_arp_spoofing_protection for noop / iptables_hybrid.
func antiSpoofFlows(p *Port) []of.Flow {
	in := of.InPort(p.Ofport)
	macs := p.allowedMACs()
	var fs []of.Flow
	for _, m := range macs {
		fs = append(fs, flow(IntMACSpoof, 2, of.Match{in, of.EthSrc(m)}, gotoT(IntLocalEgress)))
	}
	fs = append(fs, flow(IntLocalSwitching, 9, of.Match{in}, gotoT(IntMACSpoof)))

	var v4, v6 []netip.Prefix
	addrs := append([]netip.Prefix(nil), p.FixedIPs...)
	for _, ap := range p.AllowedAddressPairs {
		addrs = append(addrs, ap.IP)
	}
	for _, a := range addrs {
		if !a.IsValid() {
			continue
		}
		// An IPv4-mapped IPv6 address is IPv6, as for the reference (netaddr's
		// version): unmapping it let the port answer ARP for the IPv4 address.
		if a.Addr().Is4() {
			v4 = append(v4, a.Masked())
		} else {
			v6 = append(v6, a.Masked())
		}
	}
	for _, m := range macs {
		v6 = append(v6, netip.PrefixFrom(LinkLocal(m), 128))
	}
	v4, v6 = uniqPrefixes(v4), uniqPrefixes(v6)

	if !hasZeroPrefix(v6) {
		for _, a := range v6 {
			nd := of.IPv6Src(a)
			nd.Field = of.FieldNDTarget
			fs = append(fs, flow(IntARPSpoof, 2, of.Match{ipv6Match(), icmp6Match(), of.ICMP6Type(136), nd, in},
				gotoT(IntPacketRateLimit)))
		}
		fs = append(fs, flow(IntLocalSwitching, 10, of.Match{ipv6Match(), icmp6Match(), of.ICMP6Type(136), in},
			gotoT(IntARPSpoof)))
	}
	if !hasZeroPrefix(v4) {
		for _, a := range v4 {
			fs = append(fs, flow(IntARPSpoof, 2, of.Match{arpMatch(), of.ARPSpa(a), in}, gotoT(IntMACSpoof)))
		}
		fs = append(fs, flow(IntLocalSwitching, 10, of.Match{in, arpMatch()}, gotoT(IntARPSpoof)))
	}
	return fs
}

// egressDirectFlows is install_accepted_egress_direct_flow.
func egressDirectFlows(s *State, p *Port, n *Network) []of.Flow {
	l := n.LocalVLAN
	fs := []of.Flow{
		flow(IntTransient, 9, of.Match{of.InPort(p.Ofport), of.EthSrc(p.MAC)},
			of.SetReg(RegNet, uint32(l)), resubmit(IntLocalMACDirect)),
		flow(IntLocalMACDirect, 12, of.Match{of.DlVlan(l), of.EthDst(p.MAC)}, of.PopVLAN{}, output(p.Ofport)),
		flow(IntLocalMACDirect, 12, of.Match{of.Reg(RegNet, uint32(l)), of.EthDst(p.MAC)}, output(p.Ofport)),
	}
	var patch uint32
	switch {
	case n.Type.IsTunnel():
		patch = s.Int.PatchTunOfport
	case n.Type == TypeVLAN:
		if pb := s.Phys[n.PhysicalNetwork]; pb != nil {
			patch = pb.IntOfport
		}
	}
	if patch != 0 {
		// The reference writes mod_vlan_vid:L; on an untagged frame from an
		// access port OVS installs that as push_vlan + set_field.
		fs = append(fs, flow(IntTransientEgress, 10,
			of.Match{of.InPort(p.Ofport), of.EthSrc(p.MAC), unicastDst()},
			pushVLAN(), setVLAN(l), output(patch)))
	}
	return fs
}

// LinkLocal is the EUI-64 IPv6 link-local address of mac (fe80::/64).
func LinkLocal(mac net.HardwareAddr) netip.Addr {
	var b [16]byte
	b[0], b[1] = 0xfe, 0x80
	if len(mac) == 6 {
		b[8] = mac[0] ^ 0x02
		b[9], b[10] = mac[1], mac[2]
		b[11], b[12] = 0xff, 0xfe
		b[13], b[14], b[15] = mac[3], mac[4], mac[5]
	}
	return netip.AddrFrom16(b)
}

func uniqPrefixes(ps []netip.Prefix) []netip.Prefix {
	sort.Slice(ps, func(i, j int) bool {
		if c := ps[i].Addr().Compare(ps[j].Addr()); c != 0 {
			return c < 0
		}
		return ps[i].Bits() < ps[j].Bits()
	})
	out := ps[:0]
	for i, p := range ps {
		if i > 0 && p == ps[i-1] {
			continue
		}
		out = append(out, p)
	}
	return out
}

func hasZeroPrefix(ps []netip.Prefix) bool {
	for _, p := range ps {
		if p.Bits() == 0 {
			return true
		}
	}
	return false
}
