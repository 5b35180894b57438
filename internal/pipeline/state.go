package pipeline

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// NetworkType is a Neutron provider network type.
type NetworkType string

const (
	TypeVXLAN  NetworkType = "vxlan"
	TypeGRE    NetworkType = "gre"
	TypeGeneve NetworkType = "geneve"
	TypeVLAN   NetworkType = "vlan"
	TypeFlat   NetworkType = "flat"
	TypeLocal  NetworkType = "local"
)

// IsTunnel reports whether t is carried over br-tun.
func (t NetworkType) IsTunnel() bool { return t == TypeVXLAN || t == TypeGRE || t == TypeGeneve }

// ValidSegment reports whether seg fits the wire field of the network type,
// within the bounds neutron's type drivers give it: a VLAN id 1..4094 (12
// bits; 4095 is reserved), a VXLAN or Geneve VNI 1..2^24-1, a GRE key
// 1..2^32-1. A value outside would be truncated in a match or an action
// (VLAN 4196 became 100) and carry another network's traffic. Flat and
// local networks have no segment to check.
func (t NetworkType) ValidSegment(seg uint32) bool {
	switch t {
	case TypeVLAN:
		return seg >= 1 && seg <= 4094
	case TypeVXLAN, TypeGeneve:
		return seg >= 1 && seg < 1<<24
	case TypeGRE:
		return seg >= 1
	}
	return true
}

// segmentOK: a network with a segment that does not fit gets no flows, and
// its ports are treated as dead.
func (n *Network) segmentOK() bool { return !n.Key.HasSeg || n.Type.ValidSegment(n.Key.SegID) }

// Firewall drivers ([securitygroup] firewall_driver).
const (
	FirewallNoop           = "noop"
	FirewallOpenvSwitch    = "openvswitch"
	FirewallIptablesHybrid = "iptables_hybrid"
)

// Config is the part of the agent configuration the pipeline depends on.
type Config struct {
	FirewallDriver         string // "", "noop", "openvswitch", "iptables_hybrid"
	EnableSecurityGroup    bool
	L2Population           bool
	ARPResponder           bool // effective only with L2Population, as in the reference
	ExplicitlyEgressDirect bool
	TunnelTypes            []NetworkType
	// Distributed is enable_distributed_routing: the base pipeline leaves
	// the hooks DVR's own flows (internal/dvr) fill — br-tun's table 0 for
	// patch-int and br-phys' table 0 for phy-br-* are theirs, tunnelled
	// frames pass DVR_NOT_LEARN (table 9) and the local VLAN translation
	// of br-phys moves to LOCAL_VLAN_TRANSLATION (table 2).
	Distributed bool
}

// OVSFirewall reports whether the OVS (conntrack) firewall is in effect: the
// reference falls back to noop when security groups are disabled.
func (c *Config) OVSFirewall() bool {
	return c.EnableSecurityGroup && c.FirewallDriver == FirewallOpenvSwitch
}

// AntiSpoofing reports whether the agent itself installs the ARP/MAC
// anti-spoofing flows of tables 24/25 (the firewall does not provide them).
func (c *Config) AntiSpoofing() bool { return !c.OVSFirewall() }

// ARPResponderEnabled is arp_responder and l2_population, forced on with
// DVR and tunnelling (ovs_neutron_agent.py __init__: "ARP responder was not
// enabled but is required since DVR and tunneling are enabled").
func (c *Config) ARPResponderEnabled() bool {
	if c.Distributed && len(c.TunnelTypes) > 0 {
		return true
	}
	return c.ARPResponder && c.L2Population
}

// egressDirect is direct_for_non_openflow_firewall in the reference.
func (c *Config) egressDirect() bool { return c.ExplicitlyEgressDirect && !c.OVSFirewall() }

func (c *Config) tunnelTypeEnabled(t NetworkType) bool {
	for _, x := range c.TunnelTypes {
		if x == t {
			return true
		}
	}
	return false
}

// IntBridge is br-int as the pipeline needs it.
type IntBridge struct {
	Name           string // "br-int"
	Cookie         uint64 // written into every flow; the reconciler may override
	PatchTunOfport uint32 // ofport of patch-tun on br-int; 0 when tunnelling is off
}

// TunBridge is br-tun; State.Tun is nil when tunnel_types is empty.
type TunBridge struct {
	Name           string // "br-tun"
	Cookie         uint64
	PatchIntOfport uint32 // ofport of patch-int on br-tun
}

// PhysBridge is one bridge_mappings entry with its patch pair.
type PhysBridge struct {
	Bridge     string // "br-phys"
	Cookie     uint64
	IntOfport  uint32 // ofport of int-<bridge> on br-int
	PhysOfport uint32 // ofport of phy-<bridge> on the physical bridge
}

// NetKey identifies a local VLAN mapping: a network and one of its segments
// (the reference keys its LocalVlanManager by network id then segmentation id).
type NetKey struct {
	NetworkID string
	SegID     uint32
	HasSeg    bool // false for flat and local networks
}

// Key returns the key the reference writes as a restart hint, "<net>/<seg>"
// with "None" for no segment.
func (k NetKey) String() string {
	if !k.HasSeg {
		return k.NetworkID + "/None"
	}
	return fmt.Sprintf("%s/%d", k.NetworkID, k.SegID)
}

// Seg makes a NetKey with a segmentation id.
func Seg(network string, seg uint32) NetKey {
	return NetKey{NetworkID: network, SegID: seg, HasSeg: true}
}

// NoSeg makes a NetKey for a network without segmentation id (flat, local).
func NoSeg(network string) NetKey { return NetKey{NetworkID: network} }

// Network is one local VLAN mapping: a (network, segment) that has a local
// VLAN on this host.
type Network struct {
	Key             NetKey
	Type            NetworkType
	PhysicalNetwork string
	LocalVLAN       uint16

	// FDB is the l2population forwarding database for this network, by
	// remote agent tunnel IP (own local_ip already removed by the handler).
	FDB map[netip.Addr]*RemoteFDB
}

// RemoteFDB is what l2pop says about one remote agent for one network.
type RemoteFDB struct {
	Flood   bool       // the FLOODING_ENTRY (00:00:00:00:00:00, 0.0.0.0) is present
	Entries []FDBEntry // unicast entries
}

// FDBEntry is one [mac, ip] pair of an l2pop port entry. IP may be invalid
// (no address) or IPv6 (no ARP responder entry then).
type FDBEntry struct {
	MAC net.HardwareAddr
	IP  netip.Addr
}

// Port is one VIF on br-int.
type Port struct {
	ID     string // Neutron port id (iface-id)
	Name   string // OVS port name, e.g. tapXXXXXXXX-XX
	Ofport uint32
	MAC    net.HardwareAddr
	Net    NetKey // the mapping it is bound to; ignored for dead ports

	AdminUp bool
	// Dead: no binding / binding failed / network unknown. Dead and
	// admin-down ports sit on VLAN 4095 with a table 0 drop flow.
	Dead bool

	DeviceOwner         string
	PortSecurity        bool
	FixedIPs            []netip.Prefix // /32 or /128 for a plain fixed IP
	AllowedAddressPairs []AddressPair
}

// AddressPair is one allowed_address_pairs entry; MAC nil means the port's MAC.
type AddressPair struct {
	MAC net.HardwareAddr
	IP  netip.Prefix
}

// Filtered reports whether the port's own traffic is filtered: anti-spoofing,
// and with the OVS firewall its security groups. It is the one decision for
// the pipeline and the firewall (internal/agent hands it to the firewall as
// firewall.Port.PortSecurity), so table 60 and tables 71-94 cannot disagree.
//
// Ports without port security are not filtered, nor are the ports Neutron
// owns itself (device_owner network:*: DHCP, router interfaces), which the
// reference trusts: neutron-lib's is_port_trusted keeps them out of the
// server's security group info, so the OVS firewall driver only passes them
// through (process_trusted_ports), and the agent gives them no ARP
// protection.
func (p *Port) Filtered() bool {
	return p.PortSecurity && !strings.HasPrefix(p.DeviceOwner, "network:")
}

// allowedMACs is the port MAC followed by the distinct AAP MACs, in input order.
func (p *Port) allowedMACs() []net.HardwareAddr {
	macs := []net.HardwareAddr{p.MAC}
	for _, ap := range p.AllowedAddressPairs {
		if ap.MAC == nil {
			continue
		}
		dup := false
		for _, m := range macs {
			if macEqual(m, ap.MAC) {
				dup = true
				break
			}
		}
		if !dup {
			macs = append(macs, ap.MAC)
		}
	}
	return macs
}

// Tunnel is one tunnel port on br-tun.
type Tunnel struct {
	RemoteIP netip.Addr
	Type     NetworkType
	Ofport   uint32
}

// TunnelKey names a tunnel port: neutron has one per remote IP and type
// (vxlan-0a000002 and gre-0a000002 side by side).
type TunnelKey struct {
	IP   netip.Addr
	Type NetworkType
}

// Key is the tunnel's key in State.Tunnels.
func (t *Tunnel) Key() TunnelKey { return TunnelKey{IP: t.RemoteIP, Type: t.Type} }

// State is everything the pipeline reads. The agent owns it and mutates it
// from its single loop; pipeline functions only read it.
type State struct {
	Config Config
	Int    IntBridge
	Tun    *TunBridge             // nil: no tunnelling
	Phys   map[string]*PhysBridge // by physical network name

	Networks map[NetKey]*Network
	Ports    map[string]*Port      // by Neutron port id
	Tunnels  map[TunnelKey]*Tunnel // by remote IP and type
}

// NewState returns an empty state with the usual bridge names.
func NewState(cfg Config) *State {
	return &State{
		Config:   cfg,
		Int:      IntBridge{Name: "br-int"},
		Phys:     map[string]*PhysBridge{},
		Networks: map[NetKey]*Network{},
		Ports:    map[string]*Port{},
		Tunnels:  map[TunnelKey]*Tunnel{},
	}
}

func macEqual(a, b net.HardwareAddr) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
