package dvr

import (
	"fmt"
	"net"
	"net/netip"
	"sort"

	of "github.com/ovsagent/ovsagent/internal/openflow"
)

// Tables (neutron_lib ovs_constants) that DVR writes to.
const (
	intLocalSwitching          = 0
	intDVRToSrcMAC             = 1 // DVR_TO_SRC_MAC
	intDVRToSrcMACPhysical     = 2 // DVR_TO_SRC_MAC_PHYSICAL
	intARPDVRMACToDstMAC       = 3 // ARP_DVR_MAC_TO_DST_MAC
	intARPDVRMACToDstMACPhys   = 4 // ARP_DVR_MAC_TO_DST_MAC_PHYSICAL
	intPacketRateLimit         = 58
	intTransient               = 60
	tunLocalSwitching          = 0
	tunDVRProcess              = 1 // DVR_PROCESS
	tunPatchLVToTun            = 2
	tunDVRNotLearn             = 9 // DVR_NOT_LEARN
	tunLearnFromTun            = 10
	floodToTun                 = 22 // FLOOD_TO_TUN: also on br-phys, see processBridgeFlows
	physLocalSwitching         = 0
	physDVRProcess             = 1 // DVR_PROCESS_PHYSICAL
	physLocalVLANTranslation   = 2 // LOCAL_VLAN_TRANSLATION
	physDVRNotLearn            = 3 // DVR_NOT_LEARN_PHYSICAL
	icmp6RouterAdvertisement   = 134
	arpReply                   = 2
	priorityToSrcMAC           = 20
	priorityDstMACForARP       = 5
	priorityARPDestinationMAC  = 99
	priorityGatewayMACArp      = 5
	priorityOtherMACPhysical   = 4
	priorityOtherMACTun        = 2
	priorityProcessDrop        = 2
	priorityProcessOut         = 1
	priorityProcessGatewayDrop = 3
)

// Config is what the agent's options decide.
type Config struct {
	// Tunneling: tunnel_types is set, br-tun exists (its patch ports in Bridges).
	Tunneling bool
}

// PhysPatch is a physical network's patch pair: int-br-X on br-int, phy-br-X on br-X.
type PhysPatch struct {
	Bridge     string // br-X
	IntOfport  uint32 // int-br-X on br-int
	PhysOfport uint32 // phy-br-X on br-X
}

// Bridges are the patch ports DVR's flows name.
type Bridges struct {
	IntPatchTun uint32               // patch-tun on br-int
	TunPatchInt uint32               // patch-int on br-tun
	Phys        map[string]PhysPatch // by physical network
}

// Network is a network as the agent provisioned it on this host.
type Network struct {
	Type            string // vxlan, gre, geneve, vlan, flat (others: no DVR plumbing)
	PhysicalNetwork string // vlan, flat
	SegmentationID  uint16 // the VLAN id of a vlan network
	LocalVLAN       uint16
}

func (n *Network) tunneled() bool {
	return n.Type == "vxlan" || n.Type == "gre" || n.Type == "geneve"
}
func (n *Network) physical() bool { return n.Type == "vlan" || n.Type == "flat" }

// Subnet is get_subnet_for_dvr's answer for a subnet.
type Subnet struct {
	ID         string
	NetworkID  string
	CIDR       netip.Prefix
	GatewayIP  netip.Addr       // invalid: no gateway
	GatewayMAC net.HardwareAddr // the MAC of the router port holding the gateway IP
}

// Kind is what DVR does with a port, from its device_owner.
type Kind int

const (
	KindOther           Kind = iota
	KindRouterInterface      // network:router_interface_distributed (qr-)
	KindCentralizedSNAT      // network:router_centralized_snat (sg-)
	KindServiced             // compute:*, network:dhcp, LB (neutron's is_dvr_serviced)
)

// KindOf classifies a device_owner as the reference does
// (n_utils.is_dvr_serviced: the compute prefix, DHCP and the load balancers).
func KindOf(deviceOwner string) Kind {
	switch deviceOwner {
	case "network:router_interface_distributed":
		return KindRouterInterface
	case "network:router_centralized_snat":
		return KindCentralizedSNAT
	case "network:dhcp", "neutron:LOADBALANCER", "neutron:LOADBALANCERV2":
		return KindServiced
	}
	if len(deviceOwner) >= 8 && deviceOwner[:8] == "compute:" {
		return KindServiced
	}
	return KindOther
}

// FixedIP is one of a port's addresses.
type FixedIP struct {
	SubnetID string
	IP       netip.Addr
}

// AddressPair is an allowed address pair.
type AddressPair struct {
	IP  netip.Prefix
	MAC net.HardwareAddr
}

// Port is a port plugged on this host's br-int.
type Port struct {
	ID        string
	Kind      Kind
	NetworkID string
	Ofport    uint32
	MAC       net.HardwareAddr
	FixedIPs  []FixedIP
	Pairs     []AddressPair
}

// State is everything the DVR flows depend on.
type State struct {
	Config   Config
	Bridges  Bridges
	LocalMAC net.HardwareAddr   // this host's DVR MAC; nil: not in distributed mode, no flows
	Others   []net.HardwareAddr // the other DVR hosts' MACs (OtherHostMACs)
	Networks map[string]*Network
	Subnets  map[string]*Subnet
	Ports    []*Port
}

// Desired are the DVR flows per bridge (Phys by bridge name), without
// cookies: the agent stamps its bridge cookies.
type Desired struct {
	Int, Tun []of.Flow
	Phys     map[string][]of.Flow
}

func flow(table uint8, prio uint16, m of.Match, acts ...of.Action) of.Flow {
	return of.Flow{Table: table, Priority: prio, Match: m, Actions: acts}
}
func gotoT(t uint8) of.GotoTable                        { return of.GotoTable{Table: t} }
func output(p uint32) of.Output                         { return of.Output{Port: p} }
func setEthSrc(m net.HardwareAddr) of.SetField          { return of.SetField{Field: of.EthSrc(m)} }
func setEthDst(m net.HardwareAddr) of.SetField          { return of.SetField{Field: of.EthDst(m)} }
func vlanMatch(v uint16) of.MatchField                  { return of.DlVlan(v) }
func hostPrefix(p netip.Prefix) bool                    { return p.Bits() == p.Addr().BitLen() }
func inSubnet(s *Subnet, a netip.Addr) bool             { return s.CIDR.IsValid() && s.CIDR.Contains(a) }
func drop(table uint8, prio uint16, m of.Match) of.Flow { return flow(table, prio, m) }

// Flows decides every DVR flow of the state. It fails only on a state the
// agent must not have built (a port on a network or subnet it does not
// know, a physical network without patch ports): those are bugs upstream of
// this function, reported rather than half-plumbed.
func Flows(s *State) (Desired, error) {
	d := Desired{Phys: map[string][]of.Flow{}}
	if s.LocalMAC == nil {
		return d, nil
	}
	physnets := make([]string, 0, len(s.Bridges.Phys))
	for p := range s.Bridges.Phys {
		physnets = append(physnets, p)
	}
	sort.Strings(physnets)

	// setup_dvr_flows_on_integ_br, _on_tun_br, _on_phys_br
	d.Int = append(d.Int, drop(intDVRToSrcMAC, 1, nil), drop(intDVRToSrcMACPhysical, 1, nil))
	for _, pn := range physnets {
		pp := s.Bridges.Phys[pn]
		d.Int = append(d.Int, drop(intLocalSwitching, 2, of.Match{of.InPort(pp.IntOfport)}))
		d.Phys[pp.Bridge] = append(d.Phys[pp.Bridge],
			flow(physLocalSwitching, 2, of.Match{of.InPort(pp.PhysOfport)}, gotoT(physDVRProcess)),
			flow(physLocalSwitching, 1, nil, gotoT(physDVRNotLearn)),
			flow(physDVRProcess, 0, nil, gotoT(physLocalVLANTranslation)),
			drop(physLocalVLANTranslation, 2, of.Match{of.InPort(pp.PhysOfport)}),
			flow(physDVRNotLearn, 1, nil, output(of.PortNormal)))
	}
	if s.Config.Tunneling {
		d.Tun = append(d.Tun,
			flow(tunLocalSwitching, 1, of.Match{of.InPort(s.Bridges.TunPatchInt)}, gotoT(tunDVRProcess)),
			flow(tunDVRNotLearn, 0, nil, gotoT(tunLearnFromTun)),
			flow(tunDVRProcess, 0, nil, gotoT(tunPatchLVToTun)))
	}

	// setup_dvr_mac_flows_on_all_brs / dvr_mac_address_update: this host's
	// MAC marks ARP replies and frames routed to it; the others' mark
	// frames another host routed
	for _, pn := range physnets {
		pp := s.Bridges.Phys[pn]
		d.Int = append(d.Int, flow(intLocalSwitching, priorityGatewayMACArp,
			of.Match{of.InPort(pp.IntOfport), of.EthDst(s.LocalMAC)}, gotoT(intARPDVRMACToDstMACPhys)))
	}
	if s.Config.Tunneling {
		d.Int = append(d.Int, flow(intLocalSwitching, priorityGatewayMACArp,
			of.Match{of.InPort(s.Bridges.IntPatchTun), of.EthDst(s.LocalMAC)}, gotoT(intARPDVRMACToDstMAC)))
	}
	for _, m := range s.Others {
		for _, pn := range physnets {
			pp := s.Bridges.Phys[pn]
			d.Int = append(d.Int, flow(intLocalSwitching, priorityOtherMACPhysical,
				of.Match{of.InPort(pp.IntOfport), of.EthSrc(m)}, gotoT(intDVRToSrcMACPhysical)))
			d.Phys[pp.Bridge] = append(d.Phys[pp.Bridge], flow(physDVRNotLearn, 2,
				of.Match{of.EthSrc(m)}, output(pp.PhysOfport)))
		}
		if s.Config.Tunneling {
			d.Int = append(d.Int, flow(intLocalSwitching, priorityOtherMACTun,
				of.Match{of.InPort(s.Bridges.IntPatchTun), of.EthSrc(m)}, gotoT(intDVRToSrcMAC)))
			d.Tun = append(d.Tun, flow(tunDVRNotLearn, 1, of.Match{of.EthSrc(m)}, output(s.Bridges.TunPatchInt)))
		}
	}

	// the subnets a router interface on this host owns, and the csnat ports
	owned := map[string]*Port{} // subnet -> its router interface
	for _, p := range s.Ports {
		if p.Kind != KindRouterInterface || p.Ofport == 0 || len(p.FixedIPs) == 0 {
			continue
		}
		// a distributed router port has one fixed IP (the reference uses fixed_ips[0])
		owned[p.FixedIPs[0].SubnetID] = p
	}
	// IPv4 subnets first: a network with an IPv4 and an IPv6 subnet has one
	// router port for each, and the per-MAC flows of both (table 1/2: a
	// local port's source, table 3/4: this host's DVR MAC) share a match;
	// OpenFlow holds one, the last written (lastWins). The reference keeps
	// whichever it wrote last, by event order: the IPv6 port's when the IPv6
	// subnet came to a running router (captures-2026.2/dvr/three-hosts-v6)
	// and when a port's fixed IPs are bound in their order (IPv4 first).
	subnetIDs := make([]string, 0, len(owned))
	for id := range owned {
		subnetIDs = append(subnetIDs, id)
	}
	sort.Slice(subnetIDs, func(i, j int) bool {
		a, b := owned[subnetIDs[i]].FixedIPs[0].IP.Is4(), owned[subnetIDs[j]].FixedIPs[0].IP.Is4()
		if a != b {
			return a
		}
		return subnetIDs[i] < subnetIDs[j]
	})
	for _, sid := range subnetIDs {
		r := owned[sid]
		sub, nw, err := s.lookup(sid, r)
		if err != nil {
			return Desired{}, err
		}
		if !nw.tunneled() && !nw.physical() {
			continue // bind_port_to_dvr: "not supported for dvr plumbing"
		}
		fl, br, err := s.routerInterfaceFlows(r, r.FixedIPs[0].IP, sub, nw)
		if err != nil {
			return Desired{}, err
		}
		d.Int = append(d.Int, fl.Int...)
		if br == "" {
			d.Tun = append(d.Tun, fl.Tun...)
		} else {
			d.Phys[br] = append(d.Phys[br], fl.Tun...)
		}
		// the DVR-serviced ports of the subnet on this host
		for _, p := range s.Ports {
			if p.Kind != KindServiced || p.Ofport == 0 {
				continue
			}
			for _, ip := range p.FixedIPs {
				if ip.SubnetID != sid {
					continue
				}
				d.Int = append(d.Int, toSrcMAC(nw, sub.GatewayMAC, p.MAC, p.Ofport)...)
				for _, ap := range p.Pairs {
					if hostPrefix(ap.IP) && inSubnet(sub, ap.IP.Addr()) {
						d.Int = append(d.Int, toSrcMAC(nw, sub.GatewayMAC, ap.MAC, p.Ofport)...)
					}
				}
				break
			}
		}
	}
	// csnat ports: their first fixed IP's subnet, owned by a local router
	// interface or not (_bind_centralized_snat_port_on_dvr_subnet)
	for _, p := range s.Ports {
		if p.Kind != KindCentralizedSNAT || p.Ofport == 0 || len(p.FixedIPs) == 0 {
			continue
		}
		sub, nw, err := s.lookup(p.FixedIPs[0].SubnetID, p)
		if err != nil {
			return Desired{}, err
		}
		if !nw.tunneled() && !nw.physical() {
			continue
		}
		d.Int = append(d.Int, toSrcMAC(nw, sub.GatewayMAC, p.MAC, p.Ofport)...)
	}
	d.Int, d.Tun = lastWins(d.Int), lastWins(d.Tun)
	for br, fs := range d.Phys {
		d.Phys[br] = lastWins(fs)
	}
	return d, nil
}

// lastWins keeps, of flows with one match (table, priority, match), the
// last: what the bridge holds after writing them in order.
func lastWins(fs []of.Flow) []of.Flow {
	last := make(map[string]int, len(fs))
	for i, f := range fs {
		last[f.Key()] = i
	}
	if len(last) == len(fs) {
		return fs
	}
	out := make([]of.Flow, 0, len(last))
	for i, f := range fs {
		if last[f.Key()] == i {
			out = append(out, f)
		}
	}
	return out
}

func (s *State) lookup(subnetID string, p *Port) (*Subnet, *Network, error) {
	sub, ok := s.Subnets[subnetID]
	if !ok {
		return nil, nil, fmt.Errorf("dvr: port %s: subnet %s unknown (no get_subnet_for_dvr answer)", p.ID, subnetID)
	}
	nw, ok := s.Networks[p.NetworkID]
	if !ok {
		return nil, nil, fmt.Errorf("dvr: port %s: network %s not provisioned", p.ID, p.NetworkID)
	}
	return sub, nw, nil
}

// vlanToUse is the tag the br-int DVR_TO_SRC_MAC tables match: the local
// VLAN for tunnels, the segmentation id for VLAN networks, none for flat.
func vlanToUse(nw *Network) of.MatchField {
	switch {
	case nw.tunneled():
		return vlanMatch(nw.LocalVLAN)
	case nw.Type == "vlan":
		return vlanMatch(nw.SegmentationID)
	}
	return of.Untagged()
}

// toSrcMAC is install_dvr_to_src_mac: frames routed here for a local port
// get the subnet's gateway MAC as source (table 1/2) and go straight to the
// port (table 60).
func toSrcMAC(nw *Network, gatewayMAC, dst net.HardwareAddr, ofport uint32) []of.Flow {
	table := uint8(intDVRToSrcMAC)
	if nw.physical() {
		table = intDVRToSrcMACPhysical
	}
	m := of.Match{vlanToUse(nw), of.EthDst(dst)}
	out := []of.Action{}
	if nw.Type != "flat" { // flat: matched untagged, nothing to pop
		out = append(out, of.PopVLAN{})
	}
	out = append(out, output(ofport))
	return []of.Flow{
		flow(table, priorityToSrcMAC, m, setEthSrc(gatewayMAC), gotoT(intPacketRateLimit)),
		flow(intTransient, priorityToSrcMAC, m, out...),
	}
}

// routerInterfaceFlows is _bind_distributed_router_interface_port's flows
// for router port r (address ip) on subnet sub: br-int's and the ones of the
// bridge the network leaves by (returned in Tun; the physical bridge's name
// second, "" for br-tun).
func (s *State) routerInterfaceFlows(r *Port, ip netip.Addr, sub *Subnet, nw *Network) (Desired, string, error) {
	var d Desired
	lv := vlanMatch(nw.LocalVLAN)
	dstTable := uint8(intARPDVRMACToDstMAC)
	br := ""
	if nw.physical() {
		dstTable = intARPDVRMACToDstMACPhys
		pp, ok := s.Bridges.Phys[nw.PhysicalNetwork]
		if !ok {
			return d, "", fmt.Errorf("dvr: router port %s: physical network %q has no bridge", r.ID, nw.PhysicalNetwork)
		}
		br = pp.Bridge
	}
	// install_dvr_dst_mac_for_arp: the local VLAN (not vlanToUse) even on physical networks
	d.Int = append(d.Int, flow(dstTable, priorityDstMACForARP, of.Match{lv, of.EthDst(s.LocalMAC)},
		setEthDst(r.MAC), of.PopVLAN{}, output(r.Ofport)))
	// install_dvr_process_ipv4/ipv6 write table 22 (FLOOD_TO_TUN) on br-phys
	// too, where nothing goes: kept for equality with the reference
	if ip.Is4() {
		d.Tun = append(d.Tun, drop(floodToTun, priorityProcessGatewayDrop,
			of.Match{lv, of.EthType(of.EthTypeARP), of.ARPTpa(netip.PrefixFrom(ip, 32))}))
	} else {
		d.Tun = append(d.Tun, drop(floodToTun, priorityProcessGatewayDrop,
			of.Match{lv, of.EthType(of.EthTypeIPv6), of.IPProto(of.IPProtoICMPv6),
				of.ICMP6Type(icmp6RouterAdvertisement), of.EthSrc(r.MAC)}))
	}
	// install_dvr_process: frames for the router MAC stay local; frames
	// from it leave with this host's DVR MAC
	proc, next := uint8(tunDVRProcess), uint8(tunPatchLVToTun)
	if nw.physical() {
		proc, next = physDVRProcess, physLocalVLANTranslation
	}
	d.Tun = append(d.Tun,
		drop(proc, priorityProcessDrop, of.Match{lv, of.EthDst(r.MAC)}),
		flow(proc, priorityProcessOut, of.Match{lv, of.EthSrc(r.MAC)}, setEthSrc(s.LocalMAC), gotoT(next)))
	// change_arp_destination_mac: ARP replies to the DVR MAC go to the gateway MAC
	if ip.Is4() && sub.GatewayMAC != nil {
		d.Int = append(d.Int, flow(intLocalSwitching, priorityARPDestinationMAC,
			of.Match{of.EthType(of.EthTypeARP), of.EthDst(s.LocalMAC), of.ARPOp(arpReply), of.ARPTha(sub.GatewayMAC)},
			setEthDst(sub.GatewayMAC), gotoT(intPacketRateLimit)))
	}
	return d, br, nil
}
