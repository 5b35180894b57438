package pipeline

import (
	"net/netip"
	"sort"

	of "github.com/ovsagent/ovsagent/internal/openflow"
)

// Field references of the learn action in LEARN_FROM_TUN and of the ARP
// responder. NBits 0 means the whole field.
var (
	refVlanTCI12 = of.FieldRef{Field: of.FieldVlanTCI, NBits: 12}
	refVlanTCI   = of.FieldRef{Field: of.FieldVlanTCI}
	refEthSrc    = of.FieldRef{Field: of.FieldEthSrc}
	refEthDst    = of.FieldRef{Field: of.FieldEthDst}
	refTunID     = of.FieldRef{Field: of.FieldTunID}
	refInPort    = of.FieldRef{Field: of.FieldInPort}
	refARPSha    = of.FieldRef{Field: of.FieldARPSha}
	refARPTha    = of.FieldRef{Field: of.FieldARPTha}
	refARPSpa    = of.FieldRef{Field: of.FieldARPSpa}
	refARPTpa    = of.FieldRef{Field: of.FieldARPTpa}
)

// tunBaseFlows is setup_default_table of br-tun. The learned table-20 flows
// carry the bridge cookie so that stale-flow cleanup recognises them.
func tunBaseFlows(s *State) []of.Flow {
	patchInt := s.Tun.PatchIntOfport
	arp := s.Config.ARPResponderEnabled()
	fs := []of.Flow{
		drop(TunLocalSwitching, 0),
		flow(TunPatchLVToTun, 0, of.Match{unicastDst()}, gotoT(TunUcastToTun)),
		flow(TunPatchLVToTun, 0, of.Match{multicastDst()}, gotoT(TunFloodToTun)),
		drop(TunGRETunToLV, 0),
		drop(TunVXLANTunToLV, 0),
		drop(TunGeneveTunToLV, 0),
		flow(TunLearnFromTun, 1, nil, learnFromTun(s.Tun.Cookie), output(patchInt)),
		// 2026.1 (backported to 2024.1+, neutron bug 2123911): gratuitous
		// ARP (arp_tha broadcast), router and neighbour advertisements get
		// their own priority-2 learn flows, with the priority-1 flow's
		// actions; the reference adds them so that the announcements sent at
		// a failover re-point the MAC at its new tunnel.
		flow(TunLearnFromTun, 2, of.Match{arpMatch(), of.ARPTha(macBroadcast)}, learnFromTun(s.Tun.Cookie), output(patchInt)),
		flow(TunLearnFromTun, 2, of.Match{ipv6Match(), icmp6Match(), of.ICMP6Type(134)}, learnFromTun(s.Tun.Cookie), output(patchInt)),
		flow(TunLearnFromTun, 2, of.Match{ipv6Match(), icmp6Match(), of.ICMP6Type(136)}, learnFromTun(s.Tun.Cookie), output(patchInt)),
		flow(TunUcastToTun, 0, nil, gotoT(TunFloodToTun)),
		drop(TunFloodToTun, 0),
	}
	if !s.Config.Distributed {
		// With DVR, DVR_PROCESS' t0 in_port=patch-int goto 1 takes this
		// match (setup_default_table dvr_enabled; internal/dvr).
		fs = append(fs, flow(TunLocalSwitching, 1, of.Match{of.InPort(patchInt)}, gotoT(TunPatchLVToTun)))
	}
	if arp {
		fs = append(fs,
			flow(TunPatchLVToTun, 1, of.Match{arpMatch(), of.EthDst(macBroadcast)}, gotoT(TunARPResponder)),
			flow(TunARPResponder, 0, nil, gotoT(TunFloodToTun)))
	}
	return fs
}

// learnFromTun learns, from a frame arriving over a tunnel, the table-20 flow
// that sends frames for its source MAC back through the same tunnel.
func learnFromTun(cookie uint64) of.Learn {
	return of.Learn{
		Table:       TunUcastToTun.ID,
		Priority:    1,
		HardTimeout: 300,
		Cookie:      cookie,
		Specs: []of.LearnSpec{
			{Kind: of.LearnMatchField, Src: refVlanTCI12, Dst: refVlanTCI12},
			{Kind: of.LearnMatchField, Src: refEthSrc, Dst: refEthDst},
			{Kind: of.LearnLoadValue, Value: 0, Dst: refVlanTCI},
			{Kind: of.LearnLoadField, Src: refTunID, Dst: refTunID},
			{Kind: of.LearnOutput, Src: refInPort},
		},
	}
}

// tunPortFlow classifies traffic arriving on a tunnel port by tunnel type.
func tunPortFlow(s *State, t *Tunnel) []of.Flow {
	tt, ok := tunTable(t.Type)
	if !ok || t.Ofport == 0 {
		return nil
	}
	return []of.Flow{flow(TunLocalSwitching, 1, of.Match{of.InPort(t.Ofport)}, gotoT(tt))}
}

// tunNetworkFlows: tunnel id -> local VLAN, flooding, l2pop unicast and ARP
// responder entries of one tunnelled network.
func tunNetworkFlows(s *State, n *Network) []of.Flow {
	tt, ok := tunTable(n.Type)
	if !ok || !n.Key.HasSeg {
		return nil
	}
	l, seg := n.LocalVLAN, uint64(n.Key.SegID)
	fs := []of.Flow{
		flow(tt, 1, of.Match{of.TunID(seg)}, pushVLAN(), setVLAN(l), gotoT(tunToLVNext(s))),
	}
	if f, ok := floodFlow(s, n); ok {
		fs = append(fs, f)
	}
	fs = append(fs, l2popFlows(s, n)...)
	return fs
}

// tunToLVNext is where a tunnelled frame goes once it has its local VLAN:
// DVR_NOT_LEARN with DVR (frames from another host's DVR MAC must not be
// learnt: they are routed, br_tun.provision_local_vlan distributed), else
// LEARN_FROM_TUN.
func tunToLVNext(s *State) Table {
	if s.Config.Distributed {
		return TunDVRNotLearn
	}
	return TunLearnFromTun
}

// floodPorts is the set of tunnel ofports a network floods to: every tunnel
// of its type without l2pop, the remote agents that sent the flooding entry
// with l2pop. Sorted, so the action list is stable.
//
// Deliberate difference: with l2pop the reference first installs the flood
// flow with every tunnel port of the type when it provisions the network,
// and narrows it only when a flooding entry arrives; we flood only to the
// agents l2pop named from the start (none: no flood flow).
func floodPorts(s *State, n *Network) []uint32 {
	var ports []uint32
	if s.Config.L2Population {
		for ip, r := range n.FDB {
			if !r.Flood {
				continue
			}
			if t := s.Tunnels[TunnelKey{ip, n.Type}]; t != nil && t.Ofport != 0 {
				ports = append(ports, t.Ofport)
			}
		}
	} else {
		for _, t := range s.Tunnels {
			if t.Type == n.Type && t.Ofport != 0 {
				ports = append(ports, t.Ofport)
			}
		}
	}
	sort.Slice(ports, func(i, j int) bool { return ports[i] < ports[j] })
	return ports
}

func floodFlow(s *State, n *Network) (of.Flow, bool) {
	ports := floodPorts(s, n)
	if len(ports) == 0 {
		return of.Flow{}, false
	}
	acts := []of.Action{of.PopVLAN{}, of.SetTunnel{ID: uint64(n.Key.SegID)}}
	for _, p := range ports {
		acts = append(acts, output(p))
	}
	return flow(TunFloodToTun, 1, of.Match{of.DlVlan(n.LocalVLAN)}, acts...), true
}

// l2popFlows are the table-20 unicast flows and table-21 ARP responder
// entries from the network's FDB. When two remote agents claim the same MAC
// (or IP) the one with the higher tunnel IP wins, so the result does not
// depend on map order; the reference keeps whichever message came last.
func l2popFlows(s *State, n *Network) []of.Flow {
	if !s.Config.L2Population || len(n.FDB) == 0 {
		return nil
	}
	ips := make([]netip.Addr, 0, len(n.FDB))
	for ip := range n.FDB {
		ips = append(ips, ip)
	}
	sort.Slice(ips, func(i, j int) bool { return ips[i].Less(ips[j]) })

	l, seg := n.LocalVLAN, uint64(n.Key.SegID)
	ucast := map[uint64]of.Flow{}
	arp := map[netip.Addr]of.Flow{}
	arpOn := s.Config.ARPResponderEnabled()
	for _, ip := range ips {
		t := s.Tunnels[TunnelKey{ip, n.Type}]
		if t == nil || t.Ofport == 0 {
			continue // no tunnel port (yet): the reference skips the entries too
		}
		for _, e := range n.FDB[ip].Entries {
			if len(e.MAC) != 6 {
				continue
			}
			ucast[macKey(e.MAC)] = flow(TunUcastToTun, 2, of.Match{of.DlVlan(l), of.EthDst(e.MAC)},
				of.PopVLAN{}, of.SetTunnel{ID: seg}, output(t.Ofport))
			if arpOn && e.IP.Is4() {
				arp[e.IP] = arpResponderFlow(TunARPResponder, l, e)
			}
		}
	}
	fs := make([]of.Flow, 0, len(ucast)+len(arp))
	keys := make([]uint64, 0, len(ucast))
	for k := range ucast {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	for _, k := range keys {
		fs = append(fs, ucast[k])
	}
	aips := make([]netip.Addr, 0, len(arp))
	for ip := range arp {
		aips = append(aips, ip)
	}
	sort.Slice(aips, func(i, j int) bool { return aips[i].Less(aips[j]) })
	for _, ip := range aips {
		fs = append(fs, arp[ip])
	}
	return fs
}

// arpResponderFlow answers an ARP request for e.IP with e.MAC, turning the
// request around in place and sending it back where it came from.
func arpResponderFlow(t Table, vlan uint16, e FDBEntry) of.Flow {
	ip := netip.PrefixFrom(e.IP, 32)
	return flow(t, 1, of.Match{of.DlVlan(vlan), arpMatch(), of.ARPTpa(ip)},
		of.SetField{Field: of.ARPOp(2)},
		of.Move{Src: refARPSha, Dst: refARPTha},
		of.Move{Src: refARPSpa, Dst: refARPTpa},
		of.SetField{Field: of.ARPSha(e.MAC)},
		of.SetField{Field: of.ARPSpa(ip)},
		of.Move{Src: refEthSrc, Dst: refEthDst},
		of.SetField{Field: of.EthSrc(e.MAC)},
		output(of.PortInPort),
	)
}

func macKey(m []byte) uint64 {
	var v uint64
	for _, b := range m {
		v = v<<8 | uint64(b)
	}
	return v
}
