package firewall

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Direction of a security group rule, seen from the VM.
type Direction uint8

const (
	Ingress Direction = iota + 1
	Egress
)

func (d Direction) String() string {
	switch d {
	case Ingress:
		return "ingress"
	case Egress:
		return "egress"
	}
	return "direction(" + strconv.Itoa(int(d)) + ")"
}

// ParseDirection maps the Neutron API string.
func ParseDirection(s string) (Direction, error) {
	switch s {
	case "ingress":
		return Ingress, nil
	case "egress":
		return Egress, nil
	}
	return 0, fmt.Errorf("firewall: unknown direction %q", s)
}

// EtherType of a rule.
type EtherType uint8

const (
	IPv4 EtherType = iota + 1
	IPv6
)

func (e EtherType) String() string {
	switch e {
	case IPv4:
		return "IPv4"
	case IPv6:
		return "IPv6"
	}
	return "ethertype(" + strconv.Itoa(int(e)) + ")"
}

// ParseEtherType maps the Neutron API string.
func ParseEtherType(s string) (EtherType, error) {
	switch s {
	case "IPv4":
		return IPv4, nil
	case "IPv6":
		return IPv6, nil
	}
	return 0, fmt.Errorf("firewall: unknown ethertype %q", s)
}

// Rule is one security group rule as the SecurityGroupRule OVO carries it.
//
// PortRangeMin/Max are nil when unset (Neutron null). For ICMP they are the
// type and the code.
type Rule struct {
	ID                   string
	Direction            Direction
	EtherType            EtherType
	Protocol             string // "", "tcp", "udp", "icmp", "ipv6-icmp", "6", ...
	PortRangeMin         *int
	PortRangeMax         *int
	RemoteIPPrefix       netip.Prefix // invalid (zero) = none
	RemoteGroupID        string
	RemoteAddressGroupID string
	// Invalid says why the decoder could not read the rule (e.g. an
	// unparsable remote_ip_prefix). Such a rule is skipped and reported by
	// Problems: translating what is left of it would widen it.
	Invalid string
}

// SecurityGroup is a group and its rules. Stateless is the negation of the
// OVO's "stateful" so that the zero value is the default (stateful).
type SecurityGroup struct {
	ID        string
	Stateless bool
	Rules     []Rule
}

// AddressPair is one allowed address pair. A nil MAC means the port's MAC.
type AddressPair struct {
	MAC net.HardwareAddr
	IP  netip.Prefix // a single address is a /32 or /128
	// Invalid says why the decoder could not read the pair; it is skipped.
	Invalid string
}

// Port is one VIF on br-int as the firewall needs it.
type Port struct {
	ID       string
	OFPort   uint32
	VLAN     uint16 // local VLAN: reg6 and the conntrack zone
	MAC      net.HardwareAddr
	FixedIPs []netip.Addr
	// AllowedAddressPairs from the Port OVO.
	AllowedAddressPairs []AddressPair
	// PortSecurity false gives a pass-through port. The agent sets it from
	// pipeline.Port.Filtered, false for trusted network:* ports too.
	PortSecurity     bool
	SecurityGroupIDs []string
	// EgressDirectPatch is the ofport accepted egress unicast leaves by when
	// Config.ExplicitlyEgressDirect is set: patch-tun for tunnel networks,
	// int-<bridge> for VLAN networks, 0 for none (flat, local).
	EgressDirectPatch uint32
	// Invalid lists values of the port the decoder could not read (skipped,
	// reported by Problems).
	Invalid []string
}

// Member is one address of a remote security group (a fixed IP or an allowed
// address pair of a member port, with that port's or pair's MAC) or of an
// address group (MAC nil).
type Member struct {
	IP  netip.Prefix
	MAC net.HardwareAddr
	// Invalid says why the decoder could not read the member; it is skipped.
	Invalid string
}

// Config is the agent configuration the firewall flows depend on.
type Config struct {
	// PermittedEthertypes is [SECURITYGROUP] permitted_ethertypes, parsed.
	PermittedEthertypes []uint16
	// ExplicitlyEgressDirect is [AGENT] explicitly_egress_direct: accepted
	// traffic is output directly (table 94) instead of NORMAL.
	ExplicitlyEgressDirect bool
	// HWOffload is br-int other_config:hw-offload=true.
	HWOffload bool
}

// State is everything the firewall flows are computed from.
type State struct {
	Config Config
	// Ports on this host, by port id.
	Ports map[string]Port
	// Groups by id: every group a local port is in.
	Groups map[string]SecurityGroup
	// Members by remote security group id or address group id.
	Members map[string][]Member
}

// Owner keys.
const OwnerBase = "fw:base"

const (
	ownerPortPrefix = "fw:port:"
	ownerConjPrefix = "fw:conj:"
)

// OwnerPort is the owner of all of a port's flows.
func OwnerPort(portID string) string { return ownerPortPrefix + portID }

// OwnerConj is the owner of the remote-address conjunction flows of one local VLAN.
func OwnerConj(vlan uint16) string { return ownerConjPrefix + strconv.Itoa(int(vlan)) }

// ParseOwner splits an owner key: kind is "base", "port" or "conj".
func ParseOwner(owner string) (kind, id string, ok bool) {
	switch {
	case owner == OwnerBase:
		return "base", "", true
	case strings.HasPrefix(owner, ownerPortPrefix):
		return "port", owner[len(ownerPortPrefix):], true
	case strings.HasPrefix(owner, ownerConjPrefix):
		return "conj", owner[len(ownerConjPrefix):], true
	}
	return "", "", false
}

// protocolNumbers is neutron-lib's IP_PROTOCOL_MAP (Zed).
var protocolNumbers = map[string]uint8{
	"ah": 51, "dccp": 33, "egp": 8, "esp": 50, "gre": 47, "hopopt": 0,
	"icmp": 1, "igmp": 2, "ip": 0, "ipip": 4, "ipv6-encap": 41,
	"ipv6-frag": 44, "ipv6-icmp": 58, "icmpv6": 58, "ipv6-nonxt": 59,
	"ipv6-opts": 60, "ipv6-route": 43, "ospf": 89, "pgm": 113, "rsvp": 46,
	"sctp": 132, "tcp": 6, "udp": 17, "udplite": 136, "vrrp": 112,
}

// protocolNumber normalises a rule's protocol the way the reference does:
// digits are taken as the number, names map through neutron-lib's table,
// and for IPv6 the legacy ICMP forms ("icmp", "icmpv6", "1", which old
// database rows still carry) are ipv6-icmp (58), as neutron's server
// rewrites them on create (_make_canonical_ipv6_icmp_protocol): OVS rejects
// an ICMPv4 type match on IPv6. ok false means "any protocol".
func protocolNumber(proto string, et EtherType) (num uint8, ok bool, err error) {
	if proto == "" || proto == "any" {
		return 0, false, nil
	}
	if n, perr := strconv.Atoi(proto); perr == nil {
		if n < 0 || n > 255 {
			return 0, false, fmt.Errorf("firewall: protocol %q out of range", proto)
		}
		if n == 1 && et == IPv6 {
			return 58, true, nil
		}
		return uint8(n), true, nil
	}
	p := strings.ToLower(proto)
	if p == "icmp" && et == IPv6 {
		return 58, true, nil
	}
	n, found := protocolNumbers[p]
	if !found {
		return 0, false, fmt.Errorf("firewall: unknown protocol %q", proto)
	}
	return n, true, nil
}

// IPv6 link-local address of a MAC (modified EUI-64 under fe80::/64).
func linkLocal(mac net.HardwareAddr) netip.Addr {
	var a [16]byte
	a[0], a[1] = 0xfe, 0x80
	if len(mac) == 6 {
		a[8] = mac[0] ^ 0x02
		a[9] = mac[1]
		a[10] = mac[2]
		a[11] = 0xff
		a[12] = 0xfe
		a[13] = mac[3]
		a[14] = mac[4]
		a[15] = mac[5]
	}
	return netip.AddrFrom16(a)
}

// hostPrefix turns an address into its /32 or /128. An IPv4-mapped IPv6
// address stays IPv6, as for the reference (netaddr's version is 6).
func hostPrefix(a netip.Addr) netip.Prefix {
	return netip.PrefixFrom(a, a.BitLen())
}
